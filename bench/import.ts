// Contact import race: a ROWS-row CSV (default 1,000,000) uploaded to a running Mailroom with POST
// /contacts/imports and imported by its worker, against a baseline that reads the same file with csv-parse
// and writes the same rows into the same contacts table with plain multi-row INSERTs (1,000 rows per
// statement, one connection, no per-row checks, no progress, no errors kept, no crash safety).
//
//   node bench/import.ts                                                          # embedded PGlite
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/import.ts  # PostgreSQL
//
// The CSV (email, first_name, last_name, plan) is generated streaming into a temporary file. Mailroom runs
// as `mailroom serve` in a child process on a fresh database (a new PostgreSQL database, or a PGlite
// directory of its own); the file is streamed to it as multipart/form-data and the import is polled until
// completed. Printed: Mailroom's rows/s from the start of the upload to completion (the upload's own
// time too), the server's peak resident memory (VmHWM of its /proc status, over its whole life) and its
// memory before the upload, the baseline's rows/s on another fresh database of the same kind, and the
// ratio Mailroom / baseline. ROWS changes the file's size; HEAP_MB caps the server's heap.
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { parse } from 'csv-parse';
import { createPostgresDatabase } from '../test/helpers/database.ts';
import { runCli } from '../test/helpers/cli.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { migrate } from '../src/platform/db/migrate.ts';
import { openPostgres } from '../src/platform/db/postgres.ts';
import { openPGliteDirectory } from '../src/platform/db/pglite.ts';
import { createOrganization } from '../src/tenancy/organizations.ts';
import type { Database } from '../src/platform/db/database.ts';
import { stopChild } from './postfix.ts';
import { withTeardown } from './teardown.ts';

const ROWS = Number(process.env.ROWS ?? 1_000_000);
/** HEAP_MB caps the server's JavaScript heap (--max-old-space-size): an import that held the file would fail. */
const HEAP_MB = process.env.HEAP_MB;
const BATCH = 1000;
const onPostgres = Boolean(process.env.DATABASE_URL);

/** Writes the CSV a row at a time, waiting whenever the file's buffer is full. */
async function generateCsv(file: string): Promise<void> {
  const out = createWriteStream(file);
  if (!out.write('email,first_name,last_name,plan\n')) await once(out, 'drain');
  for (let i = 0; i < ROWS; i++) {
    const line = `user${i}@bench${i % 97}.example,First${i},Last ${i % 1000},${i % 3 === 0 ? 'pro' : 'free'}\n`;
    if (!out.write(line)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}

/** A fresh database of the kind in use, migrated: its environment for a child, and how to open it here. */
async function freshDatabase(
  teardown: Parameters<Parameters<typeof withTeardown>[0]>[0],
  label: string,
): Promise<{ env: Record<string, string>; open: () => Promise<Database> }> {
  if (onPostgres) {
    const created = await teardown.own(createPostgresDatabase, (made) => made.drop());
    return { env: { DATABASE_URL: created.url }, open: async () => openPostgres(created.url, 2) };
  }
  const dir = await teardown.own(
    () => mkdtemp(path.join(tmpdir(), `mailroom-import-${label}-`)),
    (made) => rm(made, { recursive: true, force: true }),
  );
  return { env: { MAILROOM_DATA_DIR: dir }, open: () => openPGliteDirectory(dir) };
}

const memoryOf = async (pid: number, field: 'VmHWM' | 'VmRSS') => {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
  return `${(kib / 1024).toFixed(0)} MiB`;
};

/** The file as the one part of a multipart/form-data body, streamed. */
function multipartBody(file: string, boundary: string): ReadableStream {
  async function* parts() {
    yield Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="contacts.csv"\r\n` +
        'Content-Type: text/csv\r\n\r\n',
    );
    yield* createReadStream(file);
    yield Buffer.from(
      `\r\n--${boundary}\r\nContent-Disposition: form-data; name="column_map"\r\n\r\n` +
        JSON.stringify({
          email: 'email',
          first_name: 'first_name',
          last_name: 'last_name',
          properties: { plan: { column: 'plan', type: 'string' } },
        }) +
        `\r\n--${boundary}--\r\n`,
    );
  }
  return Readable.toWeb(Readable.from(parts())) as ReadableStream;
}

async function mailroom(teardown: Parameters<Parameters<typeof withTeardown>[0]>[0], file: string) {
  const database = await freshDatabase(teardown, 'mailroom');
  const cli = async (...args: string[]) => (await runCli([...args, '--json'], database.env)).json!;
  await cli('migrate');
  const org = await cli('org', 'create', '--name', 'Import bench');
  const key = String(
    (await cli('key', 'create', '--org', String(org.id), '--name', 'bench', '--permission', 'full_access')).token,
  );
  const server = await teardown.own(
    () =>
      startServerProcess({
        ...database.env,
        ...(HEAP_MB ? { NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}` } : {}),
      }),
    (made) => stopChild(made.child),
  );
  try {
    return await importInto(server, key, file);
  } catch (error) {
    console.error(`the server's last output:\n${server.output().slice(-3000)}`);
    throw error;
  }
}

async function importInto(server: Awaited<ReturnType<typeof startServerProcess>>, key: string, file: string) {
  const pid = server.child.pid!;
  const headers = { authorization: `Bearer ${key}` };
  await fetch(`${server.base}/contact-properties`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ key: 'plan', type: 'string' }),
  });
  const idle = await memoryOf(pid, 'VmRSS');
  const boundary = `----bench${Date.now()}`;
  const started = performance.now();
  const res = await fetch(`${server.base}/contacts/imports`, {
    method: 'POST',
    headers: { ...headers, 'content-type': `multipart/form-data; boundary=${boundary}` },
    body: multipartBody(file, boundary),
    duplex: 'half',
  } as RequestInit);
  const answer = (await res.json()) as { id: string };
  if (res.status !== 201) throw new Error(`upload refused: ${res.status} ${JSON.stringify(answer)}`);
  const uploaded = (performance.now() - started) / 1000;
  let view: { status: string; counts: Record<string, number>; failure_reason: string | null };
  for (;;) {
    view = (await (await fetch(`${server.base}/contacts/imports/${answer.id}`, { headers })).json()) as typeof view;
    if (view.status === 'completed' || view.status === 'failed') break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const seconds = (performance.now() - started) / 1000;
  if (view.status !== 'completed' || view.counts.created !== ROWS) {
    throw new Error(`import ended ${view.status}: ${JSON.stringify(view)}`);
  }
  return { seconds, uploaded, peak: await memoryOf(pid, 'VmHWM'), idle };
}

/** csv-parse and plain multi-row INSERTs of the same rows into the same table, one connection. */
async function baseline(teardown: Parameters<Parameters<typeof withTeardown>[0]>[0], file: string) {
  const database = await freshDatabase(teardown, 'baseline');
  const db: Database = await teardown.own(database.open, (made) => made.close());
  await migrate(db);
  const orgId = (await createOrganization(db, { name: 'Baseline' })).id;
  const started = performance.now();
  const parser = createReadStream(file).pipe(parse({ from_line: 2 }));
  let batch: string[][] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const params: unknown[] = [orgId];
    const values = batch.map(([email, first, last, plan]) => {
      params.push(email, first, last, JSON.stringify({ plan }));
      const n = params.length;
      return `($1, $${n - 3}, $${n - 2}, $${n - 1}, $${n}::jsonb)`;
    });
    await db.query(
      `INSERT INTO contacts (organization_id, email, first_name, last_name, properties) VALUES ${values.join(', ')}`,
      params,
    );
    batch = [];
  };
  for await (const record of parser as AsyncIterable<string[]>) {
    batch.push(record);
    if (batch.length === BATCH) await flush();
  }
  await flush();
  return { seconds: (performance.now() - started) / 1000 };
}

await withTeardown(async (teardown) => {
  const dir = await teardown.own(
    () => mkdtemp(path.join(tmpdir(), 'mailroom-import-csv-')),
    (made) => rm(made, { recursive: true, force: true }),
  );
  const file = path.join(dir, 'contacts.csv');
  let started = performance.now();
  await generateCsv(file);
  const bytes = (await stat(file)).size;
  console.log(
    `${ROWS} rows, ${(bytes / 1024 / 1024).toFixed(1)} MiB of CSV generated in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
      `database: ${onPostgres ? 'PostgreSQL' : 'PGlite (embedded, on disk)'}`,
  );
  started = performance.now();
  const ours = await mailroom(teardown, file);
  const base = await baseline(teardown, file);
  const oursRate = ROWS / ours.seconds;
  const baseRate = ROWS / base.seconds;
  console.log(
    `Mailroom import   ${oursRate.toFixed(0).padStart(7)} rows/s  (${ours.seconds.toFixed(1)} s; upload stored in ${ours.uploaded.toFixed(1)} s)` +
      `  server peak RSS ${ours.peak} (${ours.idle} before the upload${HEAP_MB ? `; heap capped at ${HEAP_MB} MiB` : ''})`,
  );
  console.log(
    `baseline INSERTs  ${baseRate.toFixed(0).padStart(7)} rows/s  (${base.seconds.toFixed(1)} s; csv-parse + ${BATCH}-row INSERTs)`,
  );
  console.log(`ratio (Mailroom / baseline): ${(oursRate / baseRate).toFixed(2)}`);
});
