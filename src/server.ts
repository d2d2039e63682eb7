// The only file that listens: `mailroom serve` (and so `npm start`) calls runServer().
import type { Config } from './platform/config.ts';
import { openDatabase } from './platform/db/open.ts';
import { migrate } from './platform/db/migrate.ts';
import { buildApp, buildOpsApp } from './app.ts';
import { bootstrapDevOrganization, dashboardUrl, type DevCredentials } from './tenancy/dev-bootstrap.ts';
import { startDelivery } from './delivery/start-delivery.ts';
import { createTransport } from './delivery/transports/index.ts';
import { startWebhookDelivery } from './webhooks/start-webhooks.ts';
import { startInboundServer } from './inbound/inbound-server.ts';
import { startSubmission } from './submission/start-submission.ts';
import { startRetention } from './retention/start-retention.ts';
import type { Worker } from './queue/worker.ts';

export type Role = 'all' | 'api' | 'worker';

export async function runServer(config: Config, role: Role = 'all'): Promise<void> {
  const db = await openDatabase(config);
  await migrate(db);
  const dev = db.kind === 'pglite' ? await bootstrapDevOrganization(db, config) : undefined;

  const app = await buildApp({ db, config, runsWorkers: role !== 'api' });
  // A worker-only process does not take the API's port, so api and worker processes can share a host.
  if (role !== 'worker') await app.listen({ port: config.port, host: config.host });
  if (dev) {
    // The port bound (PORT=0 picks one), so that the printed dashboard address is the real one.
    const address = app.server.address();
    printDevCredentials(
      dev,
      dashboardUrl(config.host, typeof address === 'object' && address ? address.port : config.port),
    );
  }
  // Bounce reports and complaints arrive like API traffic: the listener runs beside the HTTP API.
  const inbound =
    role !== 'worker' && config.inboundPort !== undefined
      ? await startInboundServer({ db, signer: app.signer, host: config.host, port: config.inboundPort, log: app.log })
      : undefined;
  // Health, readiness and metrics on a port of their own: how a worker-only process is probed and scraped.
  const ops =
    config.metricsPort === undefined ? undefined : await buildOpsApp({ db, config, runsWorkers: role !== 'api' });
  if (ops) await ops.listen({ port: config.metricsPort!, host: config.host });
  // Applications hand messages in over SMTP like API traffic: beside the HTTP API too.
  const submission = role !== 'worker' ? await startSubmission({ db, config, log: app.log }) : [];
  let worker: Worker | undefined;
  const transport = role === 'api' ? undefined : createTransport(config);
  if (transport) worker = await startDelivery(db, config, transport, app.log);
  const webhooks = role === 'api' ? undefined : await startWebhookDelivery(db, config, app.log);
  // Pruning is background work like delivery: it runs where the workers run.
  const retention = role === 'api' ? undefined : startRetention(db, config, app.log);
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

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'stopping: no new requests, finishing those in flight');
    const deadline = setTimeout(() => {
      app.log.error('in-flight work did not finish in time; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    deadline.unref();
    await app.close(); // stops accepting, waits for in-flight requests
    await ops?.close();
    await inbound?.close(); // and the SMTP sessions handing in reports
    for (const listener of submission) await listener.close(); // and those handing in messages
    await worker?.stop(); // claims nothing more, lets the messages being sent finish
    await webhooks?.close();
    await retention?.stop(); // stops after its current batch
    await transport?.close();
    await db.close();
    clearTimeout(deadline);
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
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
