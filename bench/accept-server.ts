// Child process of bench/accept.ts: Mailroom's API on a fresh PostgreSQL database, and a bare Fastify
// route that parses the same JSON body and answers the same shape, on two ports. Prints one JSON line
// { mailroom, bare, token, from } when both listen; exits on SIGTERM.
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import { loadConfig } from '../src/platform/config.ts';
import { buildApp } from '../src/platform/http/app.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { createTestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase } from '../test/helpers/database.ts';

const created = await createPostgresDatabase();
const config = loadConfig({ DATABASE_URL: created.url, MAILROOM_LOG_LEVEL: 'silent', MAILROOM_DB_POOL_SIZE: '20' });
const db = openPostgres(created.url, config.dbPoolSize);
await migrate(db);
const org = await createTestOrganization(db, config, 'bench');
await db.query('UPDATE organizations SET rate_limit = 1000000, monthly_quota = 2000000000 WHERE id = $1', [org.id]);

const app = await buildApp({ db, config, logger: false });
const mailroom = await app.listen({ port: 0, host: '127.0.0.1' });

const bare = Fastify({ logger: false });
bare.post('/emails', async () => ({ object: 'email', id: randomUUID() }));
const bareAddress = await bare.listen({ port: 0, host: '127.0.0.1' });

process.stdout.write(
  `${JSON.stringify({ mailroom, bare: bareAddress, token: org.sendingKey, from: `Bench <bench@${org.domain}>` })}\n`,
);

process.once('SIGTERM', async () => {
  await app.close();
  await bare.close();
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM emails');
  process.stderr.write(`messages stored during the run: ${rows[0]!.n}\n`);
  await db.close();
  await created.drop();
  process.exit(0);
});
