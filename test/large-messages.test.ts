// Every documented size works end to end. An attachment of 29 MiB (the largest whose message still fits
// the 40 MiB limit on the encoded form, over HTTP as base64 JSON and over SMTP as MIME) is accepted by
// POST /emails, by a batch entry and by SMTP submission, delivered byte-equal to a loopback sink and
// listed by the attachment routes; just over a limit the answer is 413 over HTTP and 552 5.3.4 over
// SMTP, never a 4xx that asks the client to retry and never a 500.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { loadTlsCertificate } from '../src/submission/tls-certificate.ts';
import { startSubmissionServer, type SubmissionServer } from '../src/submission/submission-server.ts';
import { bearer, type TestApp, type TestOrganization } from './helpers/app.ts';
import { startRelayTestBed, type RelayTestBed } from './helpers/delivery.ts';
import { message } from './helpers/emails.ts';
import type { SmtpSink } from './helpers/smtp-sink.ts';
import { waitFor } from './helpers/wait.ts';

const MiB = 1024 * 1024;
const log = { info: () => {}, warn: () => {}, error: () => {} };

let bed: RelayTestBed;
let t: TestApp;
let org: TestOrganization;
let sink: SmtpSink;
let submission: SubmissionServer;
let dataDir: string;
/** 29 MiB of random bytes (random, so that nothing on the way can shrink it), and their digest. */
const content = randomBytes(29 * MiB);
const digest = createHash('sha256').update(content).digest('hex');
const base64 = content.toString('base64');

before(async () => {
  // The documented defaults: a 40 MiB request or SMTP message, 30 MiB of attachments once decoded.
  bed = await startRelayTestBed('large');
  ({ t, org, sink } = bed);
  assert.equal(t.config.bodyLimitBytes, 40 * MiB);
  assert.equal(t.config.attachmentsMaxBytes, 30 * MiB);
  dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-large-'));
  const config = { ...t.config, dataDir };
  submission = await startSubmissionServer({
    db: t.db,
    config,
    host: '127.0.0.1',
    port: 0,
    tls: await loadTlsCertificate(config),
    implicitTls: false,
    log,
  });
});
after(async () => {
  await submission.close();
  await bed.close();
  await rm(dataDir, { recursive: true, force: true });
});

const smtp = (port = submission.port, key = org.sendingKey) =>
  nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    requireTLS: true,
    auth: { user: 'mailroom', pass: key },
    tls: { rejectUnauthorized: false },
  });

/** Waits for the sink to receive the message for `to`, and checks its attachment decodes to `content`. */
async function deliveredByteEqual(to: string) {
  await waitFor(() => sink.transactions.some((tx) => tx.rcptTo.includes(to)), 60_000);
  const parsed = await sink.transactions.find((tx) => tx.rcptTo.includes(to))!.parse();
  assert.equal(parsed.attachments.length, 1);
  const [received] = parsed.attachments;
  assert.equal(received!.filename, 'big.bin');
  assert.equal(received!.content.length, content.length);
  assert.equal(createHash('sha256').update(received!.content).digest('hex'), digest);
}

/** The attachment routes list the message's attachment at its full size, and its download is byte-equal. */
async function listedWithContent(emailId: string) {
  const listed = await t.app.inject({
    method: 'GET',
    url: `/emails/${emailId}/attachments`,
    headers: bearer(org.fullKey),
  });
  assert.equal(listed.statusCode, 200, listed.body);
  const [attachment] = listed.json().data;
  assert.deepEqual([attachment.filename, attachment.size], ['big.bin', content.length]);
  const download = await t.app.inject({ method: 'GET', url: new URL(attachment.download_url).pathname });
  assert.equal(download.statusCode, 200);
  assert.equal(createHash('sha256').update(download.rawPayload).digest('hex'), digest);
}

const attachment = { filename: 'big.bin', content: base64 };

test('POST /emails with a 29 MiB attachment: accepted, delivered byte-equal, listed', async () => {
  const res = await t.app.inject({
    method: 'POST',
    url: '/emails',
    headers: { ...bearer(org.sendingKey), 'content-type': 'application/json' },
    payload: JSON.stringify(message(org, { to: 'single@example.net', attachments: [attachment] })),
  });
  assert.equal(res.statusCode, 200, res.body.slice(0, 500));
  await deliveredByteEqual('single@example.net');
  await listedWithContent(res.json().id);
});

test('a batch entry with a 29 MiB attachment: accepted, delivered byte-equal, listed', async () => {
  const res = await t.app.inject({
    method: 'POST',
    url: '/emails/batch',
    headers: { ...bearer(org.sendingKey), 'content-type': 'application/json' },
    payload: JSON.stringify([message(org, { to: 'batch@example.net', attachments: [attachment] })]),
  });
  assert.equal(res.statusCode, 200, res.body.slice(0, 500));
  const [entry] = res.json().data;
  assert.equal(entry.object, 'email', JSON.stringify(entry));
  await deliveredByteEqual('batch@example.net');
  await listedWithContent(entry.id);
});

test('SMTP submission of a message with a 29 MiB attachment: 250, delivered byte-equal, listed', async () => {
  const info = await smtp().sendMail({
    from: `App <app@${org.domain}>`,
    to: 'smtp@example.net',
    subject: 'Large',
    text: 'See the attachment',
    attachments: [{ filename: 'big.bin', content }],
  });
  const id = /^250 2\.0\.0 OK <([0-9a-f-]{36})>$/.exec(info.response)?.[1];
  assert.ok(id, info.response);
  await deliveredByteEqual('smtp@example.net');
  await listedWithContent(id);
});

test('just over the limits: 413 payload_too_large over HTTP, 552 5.3.4 over SMTP', async () => {
  // A request body one byte over 40 MiB.
  const over = JSON.stringify(message(org, { attachments: [attachment] }));
  const padded = `${over.slice(0, -1)},"text":"${'x'.repeat(40 * MiB - over.length - 9)}"}`;
  assert.equal(Buffer.byteLength(padded), 40 * MiB + 1);
  for (const url of ['/emails', '/emails/batch']) {
    const res = await t.app.inject({
      method: 'POST',
      url,
      headers: { ...bearer(org.sendingKey), 'content-type': 'application/json' },
      payload: url === '/emails' ? padded : `[${padded}]`,
    });
    assert.equal(res.statusCode, 413, `${url}: ${res.body.slice(0, 300)}`);
    assert.deepEqual([res.json().statusCode, res.json().name], [413, 'payload_too_large']);
  }

  // Attachments one byte over 30 MiB once decoded, in a body under its own limit (raised for this): over
  // HTTP, in a batch entry and over SMTP.
  const roomy = await startRelayTestBed('roomy', { MAILROOM_BODY_LIMIT_BYTES: String(64 * MiB) });
  const more = randomBytes(MiB + 1);
  const overAttachments = [attachment, { filename: 'more.bin', content: more.toString('base64') }];
  const tooMuch = `Attachments may total at most ${30 * MiB} bytes once decoded`;
  const roomyConfig = { ...roomy.t.config, dataDir };
  let roomySubmission: SubmissionServer | undefined;
  try {
    const res = await roomy.t.app.inject({
      method: 'POST',
      url: '/emails',
      headers: { ...bearer(roomy.org.sendingKey), 'content-type': 'application/json' },
      payload: JSON.stringify(message(roomy.org, { attachments: overAttachments })),
    });
    assert.equal(res.statusCode, 413, res.body);
    assert.deepEqual([res.json().name, res.json().field], ['payload_too_large', 'attachments.1.content']);

    // A batch: the entry over the limit is refused in its place (413, in the per-entry shape), the
    // other entry is accepted.
    const batch = await roomy.t.app.inject({
      method: 'POST',
      url: '/emails/batch',
      headers: { ...bearer(roomy.org.sendingKey), 'content-type': 'application/json' },
      payload: JSON.stringify([
        message(roomy.org, { to: 'fits@example.net' }),
        message(roomy.org, { attachments: overAttachments }),
      ]),
    });
    assert.equal(batch.statusCode, 200, batch.body);
    const { data, errors } = batch.json();
    assert.equal(data.length, 2);
    assert.equal(data[0].object, 'email', JSON.stringify(data[0]));
    const refusal = {
      index: 1,
      statusCode: 413,
      name: 'payload_too_large',
      message: tooMuch,
      field: 'attachments.1.content',
    };
    assert.deepEqual(data[1], { object: 'error', id: null, ...refusal });
    assert.deepEqual(errors, [refusal]);

    // SMTP, the message under the SIZE announced in EHLO: refused for good (552 5.3.4), not a 4xx that
    // has the client retry it, nor the 550 of a message refused for its content.
    roomySubmission = await startSubmissionServer({
      db: roomy.t.db,
      config: roomyConfig,
      host: '127.0.0.1',
      port: 0,
      tls: await loadTlsCertificate(roomyConfig),
      implicitTls: false,
      log,
    });
    await assert.rejects(
      smtp(roomySubmission.port, roomy.org.sendingKey).sendMail({
        from: `App <app@${roomy.org.domain}>`,
        to: 'over-attachments@example.net',
        subject: 'Attachments too large',
        text: 'x',
        attachments: [
          { filename: 'big.bin', content },
          { filename: 'more.bin', content: more },
        ],
      }),
      (error: { responseCode?: number; response?: string }) => {
        assert.equal(error.responseCode, 552, error.response);
        assert.equal(error.response, `552 5.3.4 ${tooMuch} (attachments.1.content)`);
        return true;
      },
    );
  } finally {
    await roomySubmission?.close();
    await roomy.close();
  }

  // An SMTP message over the SIZE announced in EHLO: the client is told it is permanently too big.
  await assert.rejects(
    smtp().sendMail({
      from: `App <app@${org.domain}>`,
      to: 'over@example.net',
      subject: 'Too large',
      text: 'x',
      attachments: [{ filename: 'big.bin', content: randomBytes(31 * MiB) }],
    }),
    (error: { responseCode?: number; response?: string }) => {
      assert.equal(error.responseCode, 552, error.response);
      assert.match(error.response ?? '', /^552 5\.3\.4 /);
      return true;
    },
  );
});
