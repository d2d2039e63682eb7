// Child process of bench/accept.ts and of the accept-at-scale, tracking, memory and synchronous-commit
// benchmarks: Mailroom's API on a fresh PostgreSQL database, bare Fastify routes that answer the same
// shapes without a database (POST /emails, a GIF, a 302), the floor of a durable accept, the storage
// floor and (with API_FLOOR=1) the API floor, below, each on its own port. For tracking, 20 messages of
// 50 recipients each are stored, and the signed pixel and link paths of every recipient handed over.
// Prints one JSON line { mailroom, bare, floor, storage, api, token, from, opens, clicks, database,
// organization, domain } when all listen (the last three for accept-at-scale, which fills the
// organization with stored messages); exits on SIGTERM or SIGINT, dropping the database.
// STORAGE_WRITERS (1) sets how many groups the storage floor writes at once.
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import pg from 'pg';
import { loadConfig } from '../src/platform/config.ts';
import { buildApp } from '../src/app.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { prepareMessage } from '../src/emails/prepare-message.ts';
import { storeMessages, type MessageToStore } from '../src/emails/store-messages.ts';
import { newRowId } from '../src/platform/ids.ts';
import { createTestOrganization } from '../test/helpers/app.ts';
import { createPostgresDatabase, withMethods } from '../test/helpers/database.ts';
import type { Database } from '../src/platform/db/database.ts';
import { acceptMessage } from './accept-message.ts';

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
// How busy this process's one JavaScript thread has been so far (cumulative idle and active ms): read
// before and after a measurement, it says whether that thread was what limited the rate.
bare.get('/event-loop', async () => {
  const { idle, active } = performance.eventLoopUtilization();
  return { idle, active };
});
const bareAddress = await bare.listen({ port: 0, host: '127.0.0.1' });

// The floor of a durable accept: the same bare route, answering only once the request's body is
// committed as one row (synchronous_commit on), requests arriving meanwhile written together by one
// writer, as Mailroom's group commit writes them. No credential, no checks, no other row: no accept
// path that commits before it answers can be faster on this machine and database.
const floorPool = new pg.Pool({ connectionString: created.url, max: 2 });
await floorPool.query('CREATE TABLE floor_accepted (id uuid PRIMARY KEY, body jsonb NOT NULL)');
const floorWaiting: Array<{ id: string; body: string; done(error?: unknown): void }> = [];
let floorWriting = false;
async function writeFloor(): Promise<void> {
  floorWriting = true;
  while (floorWaiting.length > 0) {
    const group = floorWaiting.splice(0, 1000);
    const error = await floorPool
      .query('INSERT INTO floor_accepted (id, body) SELECT * FROM unnest($1::uuid[], $2::jsonb[])', [
        group.map((w) => w.id),
        group.map((w) => w.body),
      ])
      .then(
        () => undefined,
        (failed: unknown) => failed,
      );
    for (const w of group) w.done(error);
  }
  floorWriting = false;
}
const floor = Fastify({ logger: false });
floor.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
  try {
    JSON.parse(body as string);
    done(null, body);
  } catch (error) {
    done(error as Error);
  }
});
floor.post('/emails', async (request) => {
  const id = randomUUID();
  await new Promise<void>((resolve, reject) => {
    floorWaiting.push({ id, body: request.body as string, done: (error) => (error ? reject(error) : resolve()) });
    if (!floorWriting) void writeFloor();
  });
  return { object: 'email', id };
});
const floorAddress = await floor.listen({ port: 0, host: '127.0.0.1' });

// The storage floor: the same bare route, answering once the message is stored as Mailroom stores an
// accepted one (its row, recipients, accepted timeline entry and delivery job, by Mailroom's own group
// statement, committed), groups written one at a time as the group commit writes them. No credential,
// no validation, no quota, no request log, no rate limit: the message is prepared once here and each
// request stores a copy under a new id. Only the rows an accepted message is kept as, and their indexes.
const stored = await prepareMessage(db, config, org.id, JSON.parse(acceptMessage(from)), new Date());
const storageWaiting: Array<{ item: MessageToStore; done(error?: unknown): void }> = [];
let storageWriting = 0;
const STORAGE_WRITERS = Number(process.env.STORAGE_WRITERS ?? 1);
async function writeStorage(): Promise<void> {
  storageWriting += 1;
  while (storageWaiting.length > 0) {
    const group = storageWaiting.splice(0, 1000);
    const error = await storeMessages(
      db,
      group.map((w) => w.item),
      { remember: [] },
    ).then(
      () => undefined,
      (failed: unknown) => failed,
    );
    for (const w of group) w.done(error);
  }
  storageWriting -= 1;
}
const storage = Fastify({ logger: false });
storage.post('/emails', async (request) => {
  const body = request.body as { subject: string };
  const id = newRowId();
  const message = { ...stored, id, messageId: `<${id}@${org.domain}>`, subject: body.subject };
  await new Promise<void>((resolve, reject) => {
    storageWaiting.push({
      item: { organizationId: org.id, message },
      done: (error) => (error ? reject(error) : resolve()),
    });
    if (storageWriting < STORAGE_WRITERS) void writeStorage();
  });
  return { object: 'email', id };
});
const storageAddress = await storage.listen({ port: 0, host: '127.0.0.1' });

// The API floor (only with API_FLOOR=1, as bench/accept.ts asks: the other benchmarks measure this
// process's memory and metrics): a second instance of Mailroom's own app doing all of its API work
// (credential, rate limit, validation, preparation, the group's statement built, request log written),
// on a database handle that answers the statement storing the messages as if written, without sending
// it (so neither the quota check inside that statement nor the wake-up after it). Not durable: about
// what the API work alone leaves of bare Fastify's rate. Its groups are smaller than Mailroom's (a
// group is answered at once), which costs it a little more per message, not less.
const storingStatement = 'stored_messages AS (';
const storesNothing = withMethods(db, {
  query: (text: string, params?: readonly unknown[]) =>
    text.includes(storingStatement) ? Promise.resolve({ rows: [{ ok: true }], rowCount: 1 }) : db.query(text, params),
} as Partial<Database>);
const apiFloorApp =
  process.env.API_FLOOR === '1' ? await buildApp({ db: storesNothing, config, logger: false }) : undefined;
const apiFloor = await apiFloorApp?.listen({ port: 0, host: '127.0.0.1' });

process.stdout.write(
  `${JSON.stringify({ mailroom, bare: bareAddress, floor: floorAddress, storage: storageAddress, api: apiFloor, token: org.sendingKey, from, opens, clicks, database: created.url, organization: org.id, domain: org.domain })}\n`,
);

// SIGTERM from the benchmark, or SIGINT when Ctrl-C reaches the whole process group: the database is
// dropped either way, once.
let stopping: Promise<void> | undefined;
const stop = () =>
  (stopping ??= (async () => {
    await app.close();
    await bare.close();
    await floor.close();
    await storage.close();
    await apiFloorApp?.close();
    await floorPool.end();
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM emails');
    process.stderr.write(`messages stored during the run (Mailroom's and the storage floor's): ${rows[0]!.n}\n`);
    await db.close();
    await created.drop();
    process.exit(0);
  })());
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
