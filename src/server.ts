// The only file that listens: `mailroom serve` (and so `npm start`) calls runServer().
import type { Config } from './platform/config.ts';
import { openDatabase } from './platform/db/open.ts';
import { migrate } from './platform/db/migrate.ts';
import { buildApp } from './platform/http/app.ts';
import { bootstrapDevOrganization } from './tenancy/dev-bootstrap.ts';

export type Role = 'all' | 'api' | 'worker';

export async function runServer(config: Config, role: Role = 'all'): Promise<void> {
  const db = await openDatabase(config);
  await migrate(db);
  if (db.kind === 'pglite') {
    const dev = await bootstrapDevOrganization(db, config);
    if (dev) printDevCredentials(dev);
  }

  const app = await buildApp({ db, config });
  // The worker role has no HTTP routes of its own yet; every role answers the health checks.
  await app.listen({ port: config.port, host: config.host });
  app.log.info({ role, database: db.kind }, 'mailroom started');

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
    await db.close();
    clearTimeout(deadline);
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

function printDevCredentials(dev: {
  organizationId: string;
  domain: string;
  fullAccessKey: string;
  sendingAccessKey: string;
}) {
  // Printed once, on the first start: the tokens are not stored anywhere they could be read back.
  process.stdout.write(
    [
      '',
      'Mailroom created a development organization (shown only this once):',
      `  organization      ${dev.organizationId}`,
      `  verified domain   ${dev.domain}`,
      `  full_access key   ${dev.fullAccessKey}`,
      `  sending_access key ${dev.sendingAccessKey}`,
      '',
      '',
    ].join('\n'),
  );
}
