// Child process of bench/accept.ts, bench/accept-at-scale.ts and bench/tracking.ts: Mailroom's API on a
// fresh PostgreSQL database, and bare Fastify routes that answer the same shapes without a database
// (POST /emails, a GIF, a 302), on two ports. For tracking, 20 messages of 50 recipients each are stored,
// and the signed pixel and link paths of every recipient handed over. Prints one JSON line { mailroom, bare,
// token, from, opens, clicks, database, organization, domain } when both listen (the last three for
// accept-at-scale, which fills the organization with stored messages); exits on SIGTERM or SIGINT, dropping
// the database.
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import { loadConfig } from '../src/platform/config.ts';
import { buildApp } from '../src/app.ts';
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

const from = `Bench <bench@${org.domain}>`;
const opens: string[] = [];
const clicks: string[] = [];
for (let message = 0; message < 20; message++) {
  const to = Array.from({ length: 50 }, (_, i) => `r${i}@example.com`);
  const sent = await app.inject({
    method: 'POST',
    url: '/emails',
    headers: { authorization: `Bearer ${org.fullKey}` },
    payload: { from, to, subject: 'Tracked', html: '<p>Hi</p>' },
  });
  const e = sent.json().id as string;
  for (const r of to) {
    opens.push(`/t/o/${app.signer.sign('open', { e, r })}`);
    clicks.push(`/t/c/${app.signer.sign('click', { e, r, u: 'https://shop.example.com/offer?id=42' })}`);
  }
}

const PIXEL = Buffer.from('R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==', 'base64');
const bare = Fastify({ logger: false, routerOptions: { maxParamLength: 8192 } });
bare.post('/emails', async () => ({ object: 'email', id: randomUUID() }));
bare.get('/t/o/:token', async (_request, reply) => reply.type('image/gif').send(PIXEL));
bare.get('/t/c/:token', async (_request, reply) => reply.redirect('https://shop.example.com/offer?id=42'));
const bareAddress = await bare.listen({ port: 0, host: '127.0.0.1' });

process.stdout.write(
  `${JSON.stringify({ mailroom, bare: bareAddress, token: org.sendingKey, from, opens, clicks, database: created.url, organization: org.id, domain: org.domain })}\n`,
);

// SIGTERM from the benchmark, or SIGINT when Ctrl-C reaches the whole process group: the database is
// dropped either way, once.
let stopping: Promise<void> | undefined;
const stop = () =>
  (stopping ??= (async () => {
    await app.close();
    await bare.close();
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM emails');
    process.stderr.write(`messages stored during the run: ${rows[0]!.n}\n`);
    await db.close();
    await created.drop();
    process.exit(0);
  })());
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
