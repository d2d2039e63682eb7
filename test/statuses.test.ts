// The status unions of src/emails/statuses.ts are exactly what the database's CHECK constraints allow.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { EMAIL_STATUSES, RECIPIENT_STATUSES } from '../src/emails/statuses.ts';
import { openTestDatabase, type TestDatabase } from './helpers/database.ts';

let t: TestDatabase;
before(async () => {
  t = await openTestDatabase();
});
after(async () => {
  await t.close();
});

/** The quoted values of a column's `CHECK (column IN (…))` constraint, sorted. */
async function checkedValues(table: string, constraint: string): Promise<string[]> {
  const { rows } = await t.db.query<{ definition: string }>(
    `SELECT pg_get_constraintdef(c.oid) AS definition FROM pg_constraint c
      WHERE c.conrelid = $1::regclass AND c.conname = $2`,
    [table, constraint],
  );
  assert.equal(rows.length, 1, `${table} has a constraint ${constraint}`);
  return [...rows[0]!.definition.matchAll(/'([^']*)'/g)].map((m) => m[1]!).sort();
}

test('EmailStatus is what emails.status allows', async () => {
  assert.deepEqual(await checkedValues('emails', 'emails_status_check'), [...EMAIL_STATUSES].sort());
});

test('RecipientStatus is what email_recipients.status allows', async () => {
  assert.deepEqual(
    await checkedValues('email_recipients', 'email_recipients_status_check'),
    [...RECIPIENT_STATUSES].sort(),
  );
});

test('a message cannot be marked failed', async () => {
  await assert.rejects(
    t.db.transaction(async (tx) => {
      const org = await tx.query<{ id: string }>(
        `INSERT INTO organizations (name, monthly_quota, rate_limit) VALUES ('statuses', 1, 1) RETURNING id`,
      );
      await tx.query(
        `INSERT INTO emails (id, organization_id, "from", "to", subject, message_id, status, recipient_count)
         VALUES (gen_random_uuid(), $1, 'a@example.com', '["b@example.com"]', 's', '<m@example.com>', 'failed', 1)`,
        [org.rows[0]!.id],
      );
    }),
    /emails_status_check/,
  );
});
