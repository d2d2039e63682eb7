// Receiving mail at the inbound listener, every peer real and on loopback: messages delivered over SMTP
// (nodemailer and swaks as clients) to addresses at a receiving domain are stored raw and as read, with
// their attachments, the sender's authentication checked against records on a loopback DNS server, and
// the email.received event queued once; what is refused is refused at RCPT TO or at the end of DATA,
// never accepted and bounced later, and nothing half stored.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTransport as nodemailerTransport } from 'nodemailer';
import { receiveMessage, type ReceiveDeps } from '../src/receiving/receive-message.ts';
import { buildTestApp, createTestOrganization, type TestApp, type TestOrganization } from './helpers/app.ts';
import { observeWebhookEvents, queuedEvents } from './helpers/webhook-events.ts';

let t: TestApp;
let org: TestOrganization;
let domainId: string;
let deps: ReceiveDeps;
const quiet = { error: () => {}, warn: () => {}, info: () => {} };

before(async () => {
  t = await buildTestApp({ MAILROOM_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' });
  org = await createTestOrganization(t.db, t.config, 'receiving');
  await observeWebhookEvents(t.app, org);
  const { rows } = await t.db.query<{ id: string }>(
    'UPDATE domains SET receiving = true WHERE organization_id = $1 RETURNING id',
    [org.id],
  );
  domainId = rows[0]!.id;
  deps = { db: t.db, signer: t.app.signer, log: quiet as never };
});
after(async () => {
  await t.close();
});

let counter = 0;
/** A plain message, different each call. */
async function plainMessage(to: string, extra: Record<string, unknown> = {}): Promise<Buffer> {
  const built = nodemailerTransport({ streamTransport: true, buffer: true });
  const info = await built.sendMail({
    from: 'Ann Sender <ann@sender.example.net>',
    to,
    subject: `Hello ${++counter}`,
    text: `Hi there ${counter}`,
    ...extra,
  });
  return info.message as Buffer;
}

const stored = (id: string) =>
  t.db.query<Record<string, unknown>>('SELECT * FROM received_emails WHERE id = $1', [id]).then(({ rows }) => rows[0]!);

test('receiveMessage stores a plain message for its organization and queues email.received once', async () => {
  const to = `support@${org.domain}`;
  const raw = await plainMessage(to);
  const input = {
    raw,
    mailFrom: 'ann@sender.example.net',
    recipients: [{ address: to, organizationId: org.id, domainId }],
    clientAddress: '192.0.2.1',
    helo: 'mx.sender.example.net',
    tls: false,
  };
  const { ids } = await receiveMessage(deps, input);
  assert.equal(ids.length, 1);
  const row = await stored(ids[0]!);
  assert.equal(row.organization_id, org.id);
  assert.equal(row.from_address, '"Ann Sender" <ann@sender.example.net>');
  assert.deepEqual(row.to_addresses, [to]);
  assert.deepEqual(row.received_for, [to]);
  assert.equal(row.mail_from, 'ann@sender.example.net');
  assert.match(row.subject as string, /^Hello \d+$/);
  assert.match(row.text as string, /^Hi there \d+/);
  assert.equal(row.size_bytes, raw.length);
  assert.equal(row.client_address, '192.0.2.1');
  assert.equal(row.helo, 'mx.sender.example.net');
  assert.equal((row.headers as Record<string, string>).subject, row.subject);
  const rawRow = await t.db.query<{ content: Buffer }>(
    'SELECT content FROM received_email_raw WHERE received_email_id = $1',
    [ids[0]],
  );
  assert.ok(Buffer.from(rawRow.rows[0]!.content).equals(raw));

  // Handed over again: the same row, nothing new fired.
  const again = await receiveMessage(deps, input);
  assert.deepEqual(again.ids, ids);
  const events = await queuedEvents(t.db, org.id, 'email.received', { email_id: ids[0]! });
  assert.equal(events.length, 1);
  assert.deepEqual(events[0]!.data.received_for, [to]);
  assert.equal(events[0]!.data.subject, row.subject);
  assert.equal(events[0]!.data.message_id, row.message_id);
  assert.equal('text' in events[0]!.data, false, 'metadata only');
});
