// The accept path's intake: a group of sends is committed as one intake row per send, and the messages
// are stored from there by the intake worker, or before any other request of their organization, with
// the time they were accepted. What changed meanwhile (an organization or a domain deleted) is taken
// into account as the foreign keys would have, and a row the database refuses does not hold back the
// others.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { commitAcceptance, type Acceptance } from '../src/emails/group-commit.ts';
import { intakeStats, startIntake, storeIntakeOf } from '../src/emails/intake.ts';
import { prepareMessage, type PreparedMessage } from '../src/emails/prepare-message.ts';
import type { EmailMessage } from '../src/emails/message-schema.ts';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { message, setLimits } from './helpers/emails.ts';

let t: TestApp;
let org: TestOrganization;

/**
 * An organization that has sent once this month: its first send makes the month's quota rows, on the
 * exact path; later groups take the quota in their own statement, and go to the intake.
 */
async function sendingOrganization(name: string): Promise<TestOrganization> {
  const o = await createTestOrganization(t.db, t.config, name);
  await setLimits(t.db, o.id, { rateLimit: 100_000, monthlyQuota: 1_000_000 });
  await commitAcceptance(t.db, acceptance(o, [await prepare(o)]));
  return o;
}

before(async () => {
  t = await buildTestApp();
  org = await sendingOrganization('intake');
});
after(() => t.close());

const quiet = { error() {}, warn() {} };

const prepare = (o: TestOrganization, extra: Record<string, unknown> = {}): Promise<PreparedMessage> =>
  prepareMessage(t.db, t.config, o.id, message(o, extra) as unknown as EmailMessage, new Date());

function acceptance(o: TestOrganization, messages: PreparedMessage[]): Acceptance {
  return { organizationId: o.id, messages, allOrNothing: true, idempotency: undefined, resultOf: (n) => ({ n }) };
}

/** Sends committed as one group: added in the same turn of the event loop, they are written together. */
async function commitGroup(o: TestOrganization, count: number, extra: Record<string, unknown> = {}) {
  const prepared = await Promise.all(
    Array.from({ length: count }, (_, i) => prepare(o, { to: `r${i}@example.com`, ...extra })),
  );
  const accepted = await Promise.all(prepared.map((m) => commitAcceptance(t.db, acceptance(o, [m]))));
  assert.deepEqual(
    accepted,
    prepared.map(() => 1),
  );
  return prepared.map((m) => m.id);
}

async function intakeRows(organizationId: string): Promise<number> {
  const { rows } = await t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM email_intake WHERE organization_id = $1',
    [organizationId],
  );
  return rows[0]!.n;
}

async function storedCount(ids: string[]): Promise<number> {
  const { rows } = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM emails WHERE id = ANY($1::uuid[])', [
    ids,
  ]);
  return rows[0]!.n;
}

test('a group of sends is committed to the intake, and a read of the organization stores it first, with the time it was accepted', async () => {
  const acceptedAfter = Date.now();
  const ids = await commitGroup(org, 3, { tags: [{ name: 'k', value: 'v' }] });
  assert.equal(await intakeRows(org.id), 3);
  assert.equal(await storedCount(ids), 0, 'nothing stored in full yet');
  await new Promise((resolve) => setTimeout(resolve, 30)); // stored later than accepted

  const read = await t.app.inject({
    method: 'GET',
    url: `/emails/${ids[1]}`,
    headers: { authorization: `Bearer ${org.fullKey}` },
  });
  assert.equal(read.statusCode, 200, read.body);
  assert.equal(read.json().last_event, 'queued');
  assert.deepEqual(read.json().tags, [{ name: 'k', value: 'v' }]);
  assert.equal(await intakeRows(org.id), 0);
  assert.equal(await storedCount(ids), 3);

  // Accepted when committed, not when stored: the message, its `accepted` entry and its job.
  const { rows } = await t.db.query<{ created: Date; accepted: Date; jobs: number; recipients: number }>(
    `SELECT e.created_at AS created,
            (SELECT created_at FROM email_events WHERE email_id = e.id AND type = 'accepted') AS accepted,
            (SELECT count(*)::int FROM jobs WHERE payload ->> 'email_id' = e.id::text) AS jobs,
            (SELECT count(*)::int FROM email_recipients WHERE email_id = e.id) AS recipients
       FROM emails e WHERE e.id = ANY($1::uuid[])`,
    [ids],
  );
  for (const row of rows) {
    assert.equal(row.jobs, 1);
    assert.equal(row.recipients, 1);
    assert.equal(row.accepted.getTime(), row.created.getTime());
    assert.ok(row.created.getTime() >= acceptedAfter - 1000);
    assert.ok(row.created.getTime() < Date.now() - 25, 'created_at is the acceptance, before the read stored it');
  }
  // The list reads them too.
  const list = await t.app.inject({
    method: 'GET',
    url: '/emails?limit=3',
    headers: { authorization: `Bearer ${org.fullKey}` },
  });
  assert.deepEqual(
    list
      .json()
      .data.map((e: { id: string }) => e.id)
      .sort(),
    [...ids].sort(),
  );
});

test('the intake worker stores what arrives, as soon as it is told', async () => {
  const worker = await startIntake(t.db, quiet);
  try {
    const ids = await commitGroup(org, 4);
    await worker.drain();
    assert.equal(await intakeRows(org.id), 0);
    assert.equal(await storedCount(ids), 4);
  } finally {
    await worker.stop();
  }
});

test('a send whose domain is deleted before it is stored keeps no domain, and an organization deleted takes its intake with it', async () => {
  const other = await sendingOrganization('intake-gone');
  const ids = await commitGroup(other, 2);
  await t.db.query('DELETE FROM domains WHERE organization_id = $1', [other.id]);
  await storeIntakeOf(t.db, other.id, quiet);
  const { rows } = await t.db.query<{ domain_id: string | null }>(
    'SELECT domain_id FROM emails WHERE id = ANY($1::uuid[])',
    [ids],
  );
  assert.deepEqual(rows, [{ domain_id: null }, { domain_id: null }]);

  const gone = await sendingOrganization('intake-deleted');
  await commitGroup(gone, 2);
  assert.equal(await intakeRows(gone.id), 2);
  await t.db.query('DELETE FROM organizations WHERE id = $1', [gone.id]);
  assert.equal(await intakeRows(gone.id), 0);
});

test('a row the database refuses is set aside in the intake, logged once, and the rows beside it are stored', async () => {
  const taken = (await commitGroup(org, 2))[0]!;
  await storeIntakeOf(t.db, org.id, quiet);
  const ids = await commitGroup(org, 3);
  // The middle send's message id taken meanwhile: storing it would break the primary key.
  const { rows } = await t.db.query<{ id: string; rows: { messages: Array<{ id: string }> } }>(
    'SELECT id::text, rows FROM email_intake WHERE organization_id = $1 ORDER BY id',
    [org.id],
  );
  assert.equal(rows.length, 3);
  const poisoned = { ...rows[1]!.rows, messages: [{ ...rows[1]!.rows.messages[0]!, id: taken }] };
  await t.db.query('UPDATE email_intake SET rows = $2 WHERE id = $1', [rows[1]!.id, JSON.stringify(poisoned)]);

  const logged: unknown[] = [];
  const log = { error: (...args: unknown[]) => logged.push(args) };
  await storeIntakeOf(t.db, org.id, log);
  assert.equal(await storedCount([ids[0]!, ids[2]!]), 2, 'the neighbours are stored');
  const { rows: kept } = await t.db.query<{ id: string; failure: string }>(
    'SELECT id::text, failure FROM email_intake WHERE organization_id = $1 AND failed_at IS NOT NULL',
    [org.id],
  );
  assert.deepEqual(
    kept.map((row) => row.id),
    [rows[1]!.id],
    'the refused row is kept, set aside',
  );
  assert.match(kept[0]!.failure, /duplicate key|unique/i);
  assert.equal(logged.length, 1);
  // Set aside: neither a read nor the worker tries it again, and it is not counted as waiting.
  await storeIntakeOf(t.db, org.id, log);
  const worker = await startIntake(t.db, { ...quiet, ...log });
  await worker.drain();
  await worker.stop();
  assert.equal(logged.length, 1);
  assert.equal((await intakeStats(t.db)).due, 0);
  await t.db.query('DELETE FROM email_intake WHERE organization_id = $1', [org.id]);
});
