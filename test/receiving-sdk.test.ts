// Received mail through the unmodified Resend SDK pointed at a real Mailroom server on loopback:
// domains.create/update with capabilities.receiving, emails.receiving.list (pages), get (both
// html_format values), attachments.list/get, the signed links (no credentials, expiring, tampering
// refused), and forward() in both forms, whose message is accepted and reaches a loopback SMTP sink.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Resend } from 'resend';
import { simpleParser } from 'mailparser';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { startRelayTestBed, type RelayTestBed } from './helpers/delivery.ts';
import { bearer, createTestOrganization, type TestOrganization } from './helpers/app.ts';
import { waitFor } from './helpers/wait.ts';
import { freePort } from './helpers/server-process.ts';
import { receiveMessage } from '../src/receiving/receive-message.ts';
import { decideRecipient } from '../src/receiving/routes.ts';
import { downloadReceivedFile } from '../src/receiving/received-emails.ts';
import { DOWNLOAD_LINK_SECONDS } from '../src/emails/attachments.ts';

const quiet = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} } as never;
// A 1×1 PNG: the inline image the HTML refers to by cid:.
const PIXEL = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

let bed: RelayTestBed;
let org: TestOrganization;
let other: TestOrganization;
let resend: Resend;
let base: string;
let domainId: string;
const ids: string[] = [];

async function compose(options: Mail.Options): Promise<Buffer> {
  return new MailComposer(options).compile().build();
}

/** Stores a message for `to` (at the organization's receiving domain) as the listener would. */
async function receive(target: TestOrganization, targetDomainId: string, options: Mail.Options): Promise<string> {
  const raw = await compose(options);
  const to = [options.to].flat().map(String);
  const { ids: stored } = await receiveMessage(
    { db: bed.t.db, signer: bed.t.app.signer, log: quiet },
    {
      raw,
      mailFrom: 'sender@outside.example',
      recipients: to.map((address) => ({ address, organizationId: target.id, domainId: targetDomainId })),
      clientAddress: '192.0.2.1',
      helo: 'mx.outside.example',
      tls: true,
    },
  );
  return stored[0]!;
}

before(async () => {
  // The links answers carry are built on MAILROOM_PUBLIC_URL: the server listens where it says.
  const port = await freePort();
  bed = await startRelayTestBed('rcvsdk', { MAILROOM_PUBLIC_URL: `http://127.0.0.1:${port}` });
  org = bed.org;
  other = await createTestOrganization(bed.t.db, bed.t.config, 'rcvother');
  base = await bed.t.app.listen({ port, host: '127.0.0.1' });
  resend = new Resend(org.fullKey, { baseUrl: base });
  const listed = await resend.domains.list();
  domainId = listed.data!.data.find((domain) => domain.name === org.domain)!.id;
});
after(() => bed.close());

test('domains.update and domains.create take capabilities.receiving; the Receiving MX record follows', async () => {
  const updated = await resend.domains.update({ id: domainId, capabilities: { receiving: 'enabled' } });
  assert.equal(updated.error, null, JSON.stringify(updated.error));
  const read = await resend.domains.get(domainId);
  assert.equal(read.error, null, JSON.stringify(read.error));
  assert.deepEqual(read.data!.capabilities, { sending: 'enabled', receiving: 'enabled' });
  const receivingRecord = read.data!.records.find((record) => record.record === 'Receiving');
  assert.ok(receivingRecord, JSON.stringify(read.data!.records));
  assert.deepEqual(
    [receivingRecord.type, receivingRecord.name, receivingRecord.priority, receivingRecord.status],
    ['MX', org.domain, 10, 'not_started'],
  );

  const name = `inbox-${process.pid}.example.test`;
  const created = await resend.domains.create({ name, capabilities: { sending: 'enabled', receiving: 'enabled' } });
  assert.equal(created.error, null, JSON.stringify(created.error));
  assert.deepEqual(created.data!.capabilities, { sending: 'enabled', receiving: 'enabled' });
  assert.ok(created.data!.records.some((record) => record.record === 'Receiving' && record.name === name));

  // Another organization may add the name and turn receiving on too (it cannot be told apart from the
  // owner before verification), but mail goes only to the organization whose domain is verified: only one
  // can be, so nobody who cannot verify a name can take its mail, or keep its owner from receiving it.
  const theirs = new Resend(other.fullKey, { baseUrl: base });
  const squatted = await theirs.domains.create({ name, capabilities: { receiving: 'enabled' } });
  assert.equal(squatted.error, null, JSON.stringify(squatted.error));
  assert.deepEqual(await decideRecipient(bed.t.db, `help@${name}`), {
    accept: false,
    code: 550,
    message: '5.1.1 No such recipient here',
  });
  await bed.t.db.query(`UPDATE domains SET status = 'verified' WHERE id = $1`, [created.data!.id]);
  const decided = await decideRecipient(bed.t.db, `help@${name}`);
  assert.equal(decided.accept && decided.organizationId, org.id);

  // Switched off, the record goes, and the listener refuses the name's addresses again.
  assert.equal(
    (await resend.domains.update({ id: created.data!.id, capabilities: { receiving: 'disabled' } })).error,
    null,
  );
  const off = await resend.domains.get(created.data!.id);
  assert.equal(off.data!.capabilities.receiving, 'disabled');
  assert.ok(!off.data!.records.some((record) => record.record === 'Receiving'));
  assert.equal((await decideRecipient(bed.t.db, `help@${name}`)).accept, false);

  // Sending cannot be switched off: Mailroom sends from every domain.
  const refused = await resend.domains.update({ id: created.data!.id, capabilities: { sending: 'disabled' } });
  assert.equal(refused.error?.name, 'validation_error');
  assert.match(refused.error!.message, /capabilities\.sending must stay enabled/);
});

test('emails.receiving.list pages newest first; get, attachments and forward work through the SDK', async () => {
  for (let n = 1; n <= 3; n += 1) {
    ids.push(
      await receive(org, domainId, {
        from: 'Alice <alice@outside.example>',
        to: `support@${org.domain}`,
        subject: `Question ${n}`,
        text: `Question number ${n}`,
      }),
    );
  }
  const withImage = await receive(org, domainId, {
    from: 'Bob <bob@outside.example>',
    to: `support@${org.domain}`,
    cc: 'carol@outside.example',
    subject: 'Receipt with a logo',
    text: 'See the receipt attached.',
    html: '<p>Logo: <img src="cid:logo@outside.example"></p>',
    headers: { 'X-Ticket': 'T-42' },
    attachments: [
      { filename: 'logo.png', content: PIXEL, contentType: 'image/png', cid: 'logo@outside.example' },
      { filename: 'receipt.txt', content: 'Total: 42 EUR', contentType: 'text/plain' },
    ],
  });
  ids.push(withImage);

  // Pages of two, newest first, then back again with before.
  const first = await resend.emails.receiving.list({ limit: 2 });
  assert.equal(first.error, null, JSON.stringify(first.error));
  assert.equal(first.data!.object, 'list');
  assert.equal(first.data!.has_more, true);
  assert.deepEqual(
    first.data!.data.map((email) => email.id),
    [ids[3], ids[2]],
  );
  const second = await resend.emails.receiving.list({ limit: 2, after: first.data!.data[1]!.id });
  assert.deepEqual(
    second.data!.data.map((email) => email.id),
    [ids[1], ids[0]],
  );
  assert.equal(second.data!.has_more, false);
  const back = await resend.emails.receiving.list({ limit: 2, before: ids[1]! });
  assert.deepEqual(
    back.data!.data.map((email) => email.id),
    [ids[3], ids[2]],
  );
  const newest = first.data!.data[0]!;
  assert.equal(newest.from, '"Bob" <bob@outside.example>', 'as written');
  assert.deepEqual(newest.to, [`support@${org.domain}`]);
  assert.deepEqual(newest.cc, ['carol@outside.example']);
  assert.deepEqual(newest.received_for, [`support@${org.domain}`]);
  assert.deepEqual(
    newest.attachments.map((attachment) => [attachment.filename, attachment.content_disposition]),
    [
      ['logo.png', 'inline'],
      ['receipt.txt', 'attachment'],
    ],
  );

  // get: inline images as data: URIs by default, the message's own cid: references on request.
  const got = await resend.emails.receiving.get(withImage);
  assert.equal(got.error, null, JSON.stringify(got.error));
  assert.equal(got.data!.object, 'email');
  assert.equal(got.data!.subject, 'Receipt with a logo');
  assert.match(got.data!.html!, new RegExp(`src="data:image/png;base64,${PIXEL.toString('base64')}"`));
  assert.equal(got.data!.headers!['x-ticket'], 'T-42');
  assert.match(got.data!.text!, /See the receipt attached/);
  const asCid = await resend.emails.receiving.get(withImage, { html_format: 'cid' });
  assert.match(asCid.data!.html!, /src="cid:logo@outside\.example"/);
  assert.equal(
    asCid.data!.attachments.find((attachment) => attachment.filename === 'logo.png')!.content_id,
    'logo@outside.example',
  );

  // The raw source, without credentials.
  const raw = await fetch(got.data!.raw!.download_url);
  assert.equal(raw.status, 200);
  assert.equal(raw.headers.get('content-type'), 'message/rfc822');
  assert.equal((await simpleParser(Buffer.from(await raw.arrayBuffer()))).subject, 'Receipt with a logo');
  assert.ok(Date.parse(got.data!.raw!.expires_at) > Date.now());

  // Attachments: list and get, each with a link that serves the content without credentials.
  const attachments = await resend.emails.receiving.attachments.list({ emailId: withImage });
  assert.equal(attachments.error, null, JSON.stringify(attachments.error));
  assert.deepEqual(
    attachments.data!.data.map((attachment) => [attachment.filename, attachment.size, attachment.content_type]),
    [
      ['logo.png', PIXEL.length, 'image/png'],
      ['receipt.txt', 13, 'text/plain'],
    ],
  );
  const onePage = await resend.emails.receiving.attachments.list({ emailId: withImage, limit: 1 });
  assert.deepEqual([onePage.data!.data.length, onePage.data!.has_more], [1, true]);
  const receipt = attachments.data!.data[1]!;
  const one = await resend.emails.receiving.attachments.get({ emailId: withImage, id: receipt.id });
  assert.equal(one.error, null, JSON.stringify(one.error));
  assert.equal(one.data!.object, 'attachment');
  const content = await fetch(one.data!.download_url);
  assert.equal(content.status, 200);
  assert.equal(await content.text(), 'Total: 42 EUR');

  // A tampered link is 404; an expired one serves nothing.
  const token = one.data!.download_url.split('/').at(-1)!;
  const tampered = await fetch(one.data!.download_url.replace(token, `${token.slice(0, -2)}xx`));
  assert.equal(tampered.status, 404);
  assert.equal(((await tampered.json()) as { name: string }).name, 'not_found');
  const later = new Date(Date.now() + (DOWNLOAD_LINK_SECONDS + 1) * 1000);
  assert.equal(await downloadReceivedFile(bed.t.db, bed.t.app.signer, token, later), null);
  assert.notEqual(await downloadReceivedFile(bed.t.db, bed.t.app.signer, token, new Date()), null);

  // forward(): passthrough resends the message as it was; wrapped attaches it as message/rfc822.
  const passthrough = await resend.emails.receiving.forward({
    emailId: withImage,
    from: `Support <support@${org.domain}>`,
    to: 'agent@example.com',
  });
  assert.equal(passthrough.error, null, JSON.stringify(passthrough.error));
  const wrapped = await resend.emails.receiving.forward({
    emailId: withImage,
    from: `Support <support@${org.domain}>`,
    to: ['lead@example.com'],
    passthrough: false,
    text: 'Please look at this one.',
  });
  assert.equal(wrapped.error, null, JSON.stringify(wrapped.error));
  await waitFor(() => bed.sink.transactions.length >= 2, 15_000);
  const byRecipient = new Map(bed.sink.transactions.map((tx) => [tx.rcptTo[0], tx]));
  const resent = await byRecipient.get('agent@example.com')!.parse();
  assert.equal(resent.subject, 'Receipt with a logo');
  assert.deepEqual(resent.attachments.map((attachment) => attachment.filename).sort(), ['logo.png', 'receipt.txt']);
  const wrapper = await byRecipient.get('lead@example.com')!.parse();
  assert.equal(wrapper.subject, 'Fwd: Receipt with a logo');
  assert.match(wrapper.text!, /Please look at this one/);
  // The original travels whole as a message/rfc822 part (mailparser reads such a part's own parts as the
  // wrapper's, so the raw message is looked at).
  const wrapperRaw = byRecipient.get('lead@example.com')!.raw.toString('utf8');
  assert.match(wrapperRaw, /Content-Type: message\/rfc822; name=forwarded_message\.eml/);
  assert.match(wrapperRaw, /\r\nSubject: Receipt with a logo\r\n/);
  assert.match(wrapperRaw, /\r\nX-Ticket: T-42\r\n/);
});

test("another organization's received email and attachment are 404; a sending key is refused", async () => {
  const theirs = new Resend(other.fullKey, { baseUrl: base });
  const got = await theirs.emails.receiving.get(ids[0]!);
  assert.equal(got.error?.name, 'not_found');
  const attachments = await theirs.emails.receiving.attachments.list({ emailId: ids[3]! });
  assert.equal(attachments.error?.name, 'not_found');
  assert.deepEqual((await theirs.emails.receiving.list()).data!.data, []);
  const sending = await new Resend(org.sendingKey, { baseUrl: base }).emails.receiving.list();
  assert.equal(sending.error?.name, 'restricted_api_key');
});

test('quarantine, search and bad queries (Mailroom extensions and refusals)', async () => {
  const spam = await receive(org, domainId, {
    from: 'prize@lottery.example',
    to: `sales@${org.domain}`,
    subject: 'You won',
    text: 'Claim now',
  });
  // The spam filter's quarantine decision, as the listener stores it when the score is over the threshold.
  await bed.t.db.query('UPDATE received_emails SET quarantined = true WHERE id = $1', [spam]);
  const get = (url: string) => bed.t.app.inject({ method: 'GET', url, headers: bearer(org.fullKey) });

  const inbox = (await get('/emails/receiving?limit=100')).json();
  assert.ok(!inbox.data.some((email: { id: string }) => email.id === spam), 'left out of the list');
  const quarantine = (await get('/emails/receiving?quarantined=true')).json();
  assert.deepEqual(
    quarantine.data.map((email: { id: string }) => email.id),
    [spam],
  );
  const single = (await get(`/emails/receiving/${spam}`)).json();
  assert.equal(single.quarantined, true);
  assert.deepEqual(single.envelope, {
    mail_from: 'sender@outside.example',
    client_address: '192.0.2.1',
    helo: 'mx.outside.example',
    tls: true,
  });

  const search = async (term: string) =>
    (await get(`/emails/receiving?search=${encodeURIComponent(term)}`))
      .json()
      .data.map((email: { subject: string }) => email.subject);
  assert.deepEqual(await search('RECEIPT'), ['Receipt with a logo']);
  assert.deepEqual(await search('bob@OUTSIDE'), ['Receipt with a logo']);
  assert.deepEqual((await search(`support@${org.domain}`)).length, 4);
  assert.deepEqual(await search('100%_'), []);

  const refusals: Array<[string, number, string | undefined]> = [
    ['/emails/receiving?limit=0', 400, 'limit'],
    ['/emails/receiving?limit=101', 400, 'limit'],
    ['/emails/receiving?after=not-an-id', 400, 'after'],
    [`/emails/receiving?after=${ids[0]}&before=${ids[1]}`, 400, 'before'],
    ['/emails/receiving?colour=blue', 400, undefined],
    [`/emails/receiving/${ids[0]}?html_format=png`, 400, 'html_format'],
    ['/emails/receiving/not-an-id', 404, undefined],
    [`/emails/receiving/${ids[0]}/attachments/not-an-id`, 404, undefined],
    [`/emails/receiving/${ids[3]}/attachments?after=${ids[0]}`, 400, 'after'],
    ['/emails/receiving/files/garbage', 404, undefined],
  ];
  for (const [url, status, field] of refusals) {
    const res = await get(url);
    assert.equal(res.statusCode, status, `${url}: ${res.body}`);
    if (field !== undefined) assert.equal(res.json().field, field, url);
    assert.equal(typeof res.json().message, 'string', url);
  }
});
