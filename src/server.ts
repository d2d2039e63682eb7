// The only file that listens: `mailroom serve` (and so `npm start`) calls runServer().
import type { Config } from './platform/config.ts';
import type { Database } from './platform/db/database.ts';
import { openDatabase } from './platform/db/open.ts';
import { migrate } from './platform/db/migrate.ts';
import { watchSchema } from './platform/db/schema-watch.ts';
import { buildApp, buildOpsApp } from './app.ts';
import { bootstrapDevOrganization, dashboardUrl, type DevCredentials } from './tenancy/dev-bootstrap.ts';
import { startDelivery } from './delivery/start-delivery.ts';
import { startBroadcastFanOut } from './broadcasts/start-broadcasts.ts';
import { createTransport } from './delivery/transports/index.ts';
import { startWebhookDelivery } from './webhooks/start-webhooks.ts';
import { autoPauseSettings } from './broadcasts/auto-pause.ts';
import { startInboundServer } from './inbound/inbound-server.ts';
import { startSubmission } from './submission/start-submission.ts';
import { loadTlsCertificate } from './submission/tls-certificate.ts';
import { createAuthenticator } from './receiving/authentication.ts';
import { createSpamChecker } from './receiving/spam-check.ts';
import { startRetention } from './retention/start-retention.ts';
import { startDoctor } from './doctor/start-doctor.ts';
import { startContactImports } from './contacts/imports/start-imports.ts';
import { startAutomations } from './automations/start-automations.ts';
import { doctorContext } from './doctor/doctor-routes.ts';
import type { Worker } from './queue/worker.ts';
import { listenOrExplain } from './platform/listen-error.ts';

export type Role = 'all' | 'api' | 'worker';

/**
 * Started once everything runs when the process holds the embedded database, closed first at stop: how
 * CLI commands reach a database no other process can open (the CLI's admin socket).
 */
export type AdminListener = (db: Database) => Promise<{ close(): Promise<void> }>;

export async function runServer(config: Config, role: Role = 'all', admin?: AdminListener): Promise<void> {
  const db = await openDatabase(config);
  // A schema this release cannot serve, or a migration that fails, ends the start with nothing running.
  await migrate(db).catch(async (error: unknown) => {
    await db.close().catch(() => {});
    throw error;
  });
  const app = await buildApp({ db, config, runsWorkers: role !== 'api' });
  // What is listening so far, closed again if a later port cannot be bound: a start that fails leaves
  // nothing running and, on the embedded default, has created nothing (see the bootstrap below).
  const listening: Array<{ close(): Promise<unknown> }> = [];
  let inbound: Awaited<ReturnType<typeof startInboundServer>> | undefined;
  let ops: Awaited<ReturnType<typeof buildOpsApp>> | undefined;
  let submission: Awaited<ReturnType<typeof startSubmission>> = [];
  let transport: ReturnType<typeof createTransport> | undefined;
  try {
    const { host } = config;
    // A worker-only process does not take the API's port, so api and worker processes can share a host.
    if (role !== 'worker') {
      const where = { what: 'the HTTP API', host, port: config.port, setting: 'PORT' };
      await listenOrExplain(where, () => app.listen({ port: config.port, host }));
      listening.push(app);
    }
    // Bounce reports, complaints and received mail arrive like API traffic: the listener runs beside the
    // HTTP API. STARTTLS offers the certificate the submission listeners use.
    if (role !== 'worker' && config.inboundPort !== undefined) {
      const port = config.inboundPort;
      const where = { what: 'the inbound SMTP listener', host, port, setting: 'MAILROOM_INBOUND_PORT' };
      const tls = await loadTlsCertificate(config);
      inbound = await listenOrExplain(where, () =>
        startInboundServer({
          db,
          signer: app.signer,
          host,
          port,
          log: app.log,
          returnPathDomain: config.returnPathDomain,
          maxMessageBytes: config.inboundMaxBytes,
          tls,
          authenticate: createAuthenticator(config),
          spamCheck: createSpamChecker(config, app.log),
          autoPause: autoPauseSettings(config),
        }),
      );
      listening.push(inbound);
    }
    // Health, readiness and metrics on a port of their own: how a worker-only process is probed and scraped.
    if (config.metricsPort !== undefined) {
      const port = config.metricsPort;
      const opsApp = await buildOpsApp({ db, config, runsWorkers: role !== 'api' });
      listening.push(opsApp);
      const where = { what: 'metrics and health', host, port, setting: 'MAILROOM_METRICS_PORT' };
      await listenOrExplain(where, () => opsApp.listen({ port, host }));
      ops = opsApp;
    }
    // Applications hand messages in over SMTP like API traffic: beside the HTTP API too.
    if (role !== 'worker') submission = await startSubmission({ db, config, log: app.log });
    listening.push(...submission);
    // Reads the shaping file: a mistake in it stops the start here, before anything is created.
    if (role !== 'api') transport = createTransport(config, db, { log: app.log });
  } catch (error) {
    for (const listener of listening.reverse()) await listener.close().catch(() => {});
    if (!listening.includes(app)) await app.close().catch(() => {});
    await db.close().catch(() => {});
    throw error;
  }

  let worker: Worker | undefined;
  if (transport) worker = await startDelivery(db, config, transport, app.log);
  // Broadcasts become copies where the copies are delivered.
  const fanOut = transport ? await startBroadcastFanOut(db, config, app.log) : undefined;
  const webhooks = role === 'api' ? undefined : await startWebhookDelivery(db, config, app.log);
  // Pruning is background work like delivery: it runs where the workers run.
  const retention = role === 'api' ? undefined : startRetention(db, config, app.log);
  // The deliverability doctor's daily round of every verified domain, also where the workers run.
  const doctor = role === 'api' ? undefined : startDoctor(doctorContext(db, config), app.log);
  // CSV contact imports (uploaded through the API) are read and written where the workers run.
  const imports = role === 'api' ? undefined : await startContactImports(db, config, app.log);
  // Events sent through the API start and resume automation runs where the workers run.
  const automations = role === 'api' ? undefined : await startAutomations(db, config, app.log);
  // Everything is running: only now is the development organization made, so that its credentials,
  // shown only once, are never created by a start that then fails.
  const dev = db.kind === 'pglite' ? await bootstrapDevOrganization(db, config) : undefined;
  if (dev) {
    // The port bound (PORT=0 picks one), so that the printed dashboard address is the real one.
    const address = app.server.address();
    printDevCredentials(
      dev,
      dashboardUrl(config.host, typeof address === 'object' && address ? address.port : config.port),
    );
  }
  const adminSocket =
    db.kind === 'pglite' && admin
      ? await admin(db).catch((error: Error) => {
          app.log.warn({ err: error }, 'no admin socket: CLI commands must wait until the server stops');
          return undefined;
        })
      : undefined;
  let schemaWatch: { stop(): Promise<void> } | undefined;
  let stopping = false;
  const stop = async (signal: string, exitCode = 0) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'stopping: no new requests, finishing those in flight');
    await schemaWatch?.stop();
    const deadline = setTimeout(() => {
      app.log.error('in-flight work did not finish in time; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    deadline.unref();
    await app.close(); // stops accepting, waits for in-flight requests
    await adminSocket?.close(); // and the CLI commands being run
    await ops?.close();
    await inbound?.close(); // and the SMTP sessions handing in reports
    for (const listener of submission) await listener.close(); // and those handing in messages
    await fanOut?.stop(); // ends each broadcast's fan-out after its batch in flight
    await worker?.stop(); // claims nothing more, lets the messages being sent finish
    await webhooks?.close();
    await retention?.stop(); // stops after its current batch
    await doctor?.stop();
    await imports?.stop(); // each import stops after its current batch, to resume there
    await automations?.stop(); // lets the event and step jobs running finish
    await transport?.close();
    await db.close();
    clearTimeout(deadline);
    process.exit(exitCode);
  };
  // Before anything can take time: a signal from now on stops the process cleanly.
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
  // A later release's contract migration applied beside this process (PostgreSQL only: the embedded
  // database has one process) means this code may no longer fit the schema: it stops rather than write
  // rows the newer code would misread.
  if (db.kind === 'postgres') {
    schemaWatch = await watchSchema(db, (error) => {
      app.log.error(error.message);
      process.stderr.write(`mailroom: ${error.message}\n`);
      void stop('schema', 1);
    });
  }
  app.log.info(
    {
      role,
      database: db.kind,
      transport: transport?.name,
      inboundPort: inbound?.port,
      submissionPorts: submission.map((listener) => listener.port),
      metricsPort: config.metricsPort,
    },
    'mailroom started',
  );
}

function printDevCredentials(dev: DevCredentials, dashboard: string) {
  // Printed once, on the first start: the tokens and the password are not stored anywhere they could be
  // read back.
  process.stdout.write(
    [
      '',
      'Mailroom created a development organization (shown only this once):',
      `  organization      ${dev.organizationId}`,
      `  verified domain   ${dev.domain}`,
      `  full_access key   ${dev.fullAccessKey}`,
      `  sending_access key ${dev.sendingAccessKey}`,
      '',
      `  dashboard         ${dashboard}`,
      `  user              ${dev.userEmail}`,
      `  password          ${dev.userPassword}`,
      '',
      '',
    ].join('\n'),
  );
}
