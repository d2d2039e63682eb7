import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { ParsedMail } from 'mailparser';
import { createTestOrganization, type TestOrganization } from './helpers/app.ts';
import { assertRefused, checkedCaller } from './helpers/checked-calls.ts';
import { startRelayTestBed, type RelayTestBed } from './helpers/delivery.ts';
import { waitFor } from './helpers/wait.ts';
import { readReplyAddress, replyAddress } from '../src/emails/reply-address.ts';
import { returnPathAddress } from '../src/delivery/return-path.ts';
import { findRepliedEmail, stripQuotedText } from '../src/receiving/replies.ts';
import { startInboundServer } from '../src/inbound/inbound-server.ts';
import { createTransport as smtpClient } from 'nodemailer';

// Replies tied to what was sent: the sending side's signed reply address (per domain, per send), the
// ways a received message is tied back to a sent one (reply address, In-Reply-To, References), and the
// reply's text without its quoted history. Sends go over real HTTP and are delivered over real SMTP to a
// loopback sink, whose copy is read back.

describe('replies tied to what was sent', () => {
  let bed: RelayTestBed;
  let org: TestOrganization;
  let other: TestOrganization;
  let base: string;

  before(async () => {
    bed = await startRelayTestBed('replies');
    org = bed.org;
    other = await createTestOrganization(bed.t.db, bed.t.config, 'other');
    base = await bed.t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await bed?.close();
  });

  const call = checkedCaller(
    () => base,
    () => org.fullKey,
  );

  async function domainId(of: TestOrganization): Promise<string> {
    const { rows } = await bed.t.db.query<{ id: string }>(
      'SELECT id FROM domains WHERE organization_id = $1 AND name = $2',
      [of.id, of.domain],
    );
    return rows[0]!.id;
  }

  async function setDomainReplyTracking(on: boolean, of = org): Promise<void> {
    const answer = await call('PATCH', `/domains/${await domainId(of)}`, { reply_tracking: on }, of.fullKey);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
  }

  let sent = 0;
  /** Sends one message (over HTTP), waits for its copy at the sink; its id, stored reply address and copy. */
  async function sendAndDeliver(
    extra: Record<string, unknown> = {},
    from = org,
  ): Promise<{ id: string; replyAddress: string | null; copy: ParsedMail }> {
    sent += 1;
    const subject = `Reply test ${sent}`;
    const answer = await call(
      'POST',
      '/emails',
      { from: `Acme <hello@${from.domain}>`, to: 'customer@example.com', subject, text: 'Hello', ...extra },
      from.fullKey,
    );
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    return delivered(answer.body.id, subject);
  }

  async function delivered(id: string, subject: string) {
    let copy: ParsedMail | undefined;
    await waitFor(async () => {
      for (const transaction of bed.sink.transactions) {
        const parsed = await transaction.parse();
        if (parsed.subject === subject) copy = parsed;
      }
      return copy !== undefined;
    }, 10_000);
    const { rows } = await bed.t.db.query<{ reply_address: string | null }>(
      'SELECT reply_address FROM emails WHERE id = $1',
      [id],
    );
    return { id, replyAddress: rows[0]!.reply_address, copy: copy! };
  }

  const replyToOf = (copy: ParsedMail) => copy.replyTo?.value.map((entry) => entry.address) ?? [];

  describe('the reply address a sent message carries', () => {
    test('the domain option: taken by POST /domains and PATCH /domains/:id, shown in the domain', async () => {
      const added = await call('POST', '/domains', {
        name: `replies-${process.pid}.example.test`,
        reply_tracking: true,
      });
      assert.equal(added.status, 201, JSON.stringify(added.body));
      assert.equal(added.body.reply_tracking, true);
      const plain = await call('POST', '/domains', { name: `plain-${process.pid}.example.test` });
      assert.equal(plain.body.reply_tracking, false, 'off unless asked for');

      assert.equal((await call('PATCH', `/domains/${added.body.id}`, { reply_tracking: false })).status, 200);
      assert.equal((await call('GET', `/domains/${added.body.id}`)).body.reply_tracking, false);
      // Left out of a PATCH, it stays as it is.
      await call('PATCH', `/domains/${plain.body.id}`, { reply_tracking: true });
      await call('PATCH', `/domains/${plain.body.id}`, { tls: 'enforced' });
      assert.equal((await call('GET', `/domains/${plain.body.id}`)).body.reply_tracking, true);
    });

    test('a reply_tracking that is not a boolean is refused, naming the field', async () => {
      assertRefused(
        await call('PATCH', `/domains/${await domainId(org)}`, { reply_tracking: 'yes' }),
        400,
        'validation_error',
        'reply_tracking',
      );
      assertRefused(
        await call('POST', '/emails', {
          from: `hello@${org.domain}`,
          to: 'a@example.com',
          subject: 'x',
          text: 'x',
          reply_tracking: 1,
        }),
        400,
        'validation_error',
        'reply_tracking',
      );
    });

    test('off by default: no Reply-To is added and none is recorded', async () => {
      const { replyAddress: recorded, copy } = await sendAndDeliver();
      assert.equal(recorded, null);
      assert.deepEqual(replyToOf(copy), []);
    });

    test("the domain's option gives its messages a signed reply address at the From domain", async () => {
      await setDomainReplyTracking(true);
      try {
        const { id, replyAddress: recorded, copy } = await sendAndDeliver();
        assert.ok(recorded, 'recorded on the message');
        assert.match(recorded, new RegExp(`^reply\\+[0-9a-f]{32}-[0-9a-f]{24}@${org.domain.replaceAll('.', '\\.')}$`));
        assert.ok(recorded.split('@')[0]!.length <= 64, 'a valid local part');
        assert.deepEqual(replyToOf(copy), [recorded], 'the copy sent carries it as Reply-To');
        assert.equal(readReplyAddress(bed.t.app.signer, recorded), id, 'it names the message');
        // DKIM covers Reply-To: a receiver can trust the address came from the domain.
        const dkim = copy.headerLines.find((header) => header.key === 'dkim-signature')?.line ?? '';
        assert.match(dkim.replace(/\s+/g, ''), /h=[^;]*reply-to/i);
      } finally {
        await setDomainReplyTracking(false);
      }
    });

    test("a send's reply_tracking overrides its domain's, either way", async () => {
      const on = await sendAndDeliver({ reply_tracking: true });
      assert.ok(on.replyAddress);
      assert.deepEqual(replyToOf(on.copy), [on.replyAddress]);

      await setDomainReplyTracking(true);
      try {
        const off = await sendAndDeliver({ reply_tracking: false });
        assert.equal(off.replyAddress, null);
        assert.deepEqual(replyToOf(off.copy), []);
      } finally {
        await setDomainReplyTracking(false);
      }
    });

    test("a send with a reply_to keeps the sender's and gets no reply address", async () => {
      const { replyAddress: recorded, copy } = await sendAndDeliver({
        reply_to: 'support@example.com',
        reply_tracking: true,
      });
      assert.equal(recorded, null);
      assert.deepEqual(replyToOf(copy), ['support@example.com']);
    });

    test('a batch entry takes reply_tracking like a single send', async () => {
      const subject = `Batch reply test ${process.pid}`;
      const answer = await call('POST', '/emails/batch', [
        { from: `hello@${org.domain}`, to: 'a@example.com', subject, text: 'x', reply_tracking: true },
      ]);
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      const { id, replyAddress: recorded, copy } = await delivered(answer.body.data[0].id, subject);
      assert.equal(readReplyAddress(bed.t.app.signer, recorded ?? ''), id);
      assert.deepEqual(replyToOf(copy), [recorded]);
    });
  });

  describe('which sent message a received one answers', () => {
    let mine: { id: string; messageId: string; replyAddress: string };
    let theirs: { id: string; messageId: string; replyAddress: string };

    before(async () => {
      const read = async (id: string) => {
        const { rows } = await bed.t.db.query<{ message_id: string; reply_address: string }>(
          'SELECT message_id, reply_address FROM emails WHERE id = $1',
          [id],
        );
        return { id, messageId: rows[0]!.message_id, replyAddress: rows[0]!.reply_address };
      };
      mine = await read((await sendAndDeliver({ reply_tracking: true })).id);
      theirs = await read((await sendAndDeliver({ reply_tracking: true }, other)).id);
    });

    const find = (organizationId: string, message: Partial<Parameters<typeof findRepliedEmail>[3]>) =>
      findRepliedEmail(bed.t.db, bed.t.app.signer, organizationId, {
        recipients: [],
        inReplyTo: undefined,
        references: [],
        ...message,
      });

    test('a reply to the reply address is tied to its message', async () => {
      assert.equal(await find(org.id, { recipients: ['someone@else.example', mine.replyAddress] }), mine.id);
      // Servers may change the case of a local part.
      assert.equal(await find(org.id, { recipients: [mine.replyAddress.toUpperCase()] }), mine.id);
    });

    test("another organization's reply address ties nothing", async () => {
      assert.equal(await find(org.id, { recipients: [theirs.replyAddress] }), null);
      assert.equal(await find(other.id, { recipients: [theirs.replyAddress] }), theirs.id);
    });

    test('a forged or altered reply address ties nothing', async () => {
      const [local, domain] = mine.replyAddress.split('@') as [string, string];
      const flipped = local.slice(0, -1) + (local.endsWith('0') ? '1' : '0');
      assert.equal(await find(org.id, { recipients: [`${flipped}@${domain}`] }), null, 'a changed tag');
      // Another message's id under this message's tag.
      const [, , tag] = /^reply\+([0-9a-f]{32})-([0-9a-f]{24})$/.exec(local)!;
      const otherHex = theirs.id.replaceAll('-', '');
      assert.equal(await find(other.id, { recipients: [`reply+${otherHex}-${tag}@${domain}`] }), null);
      // The same scheme signed with another key (another installation).
      const { createSigner } = await import('../src/platform/signing.ts');
      const stranger = createSigner(Buffer.alloc(32, 7));
      assert.equal(await find(org.id, { recipients: [replyAddress(stranger, mine.id, org.domain)] }), null);
      // A return path for the same message is signed for another purpose.
      const bounce = returnPathAddress({ signer: bed.t.app.signer, domain }, mine.id, 'customer@example.com');
      assert.equal(await find(org.id, { recipients: [bounce] }), null);
      assert.equal(await find(org.id, { recipients: ['reply+nonsense@x.example', 'reply@x.example'] }), null);
    });

    test('In-Reply-To naming one of its Message-IDs ties it', async () => {
      assert.equal(await find(org.id, { inReplyTo: mine.messageId }), mine.id);
      assert.equal(await find(org.id, { inReplyTo: `  ${mine.messageId.toUpperCase()} ` }), mine.id);
    });

    test("another organization's Message-ID ties nothing, in In-Reply-To or References", async () => {
      assert.equal(await find(org.id, { inReplyTo: theirs.messageId }), null);
      assert.equal(await find(org.id, { references: [theirs.messageId] }), null);
    });

    test('a Message-ID that only looks like one (the right id at another domain) ties nothing', async () => {
      const lookalike = mine.messageId.replace(/@.*>$/, '@attacker.example>');
      assert.equal(await find(org.id, { inReplyTo: lookalike }), null);
      assert.equal(await find(org.id, { inReplyTo: '<not-a-uuid@example.com>', references: ['<x@y>'] }), null);
    });

    test('References are read from the last: the message answered directly wins', async () => {
      const earlier = (await sendAndDeliver()).id;
      const { rows } = await bed.t.db.query<{ message_id: string }>('SELECT message_id FROM emails WHERE id = $1', [
        earlier,
      ]);
      const earlierId = rows[0]!.message_id;
      assert.equal(
        await find(org.id, { references: ['<thread-start@example.com>', earlierId, mine.messageId] }),
        mine.id,
      );
      assert.equal(await find(org.id, { references: [earlierId, mine.messageId, theirs.messageId] }), mine.id);
      assert.equal(await find(org.id, { references: [`${earlierId} ${mine.messageId}`] }), mine.id, 'one header value');
      // In-Reply-To comes before References.
      assert.equal(await find(org.id, { inReplyTo: earlierId, references: [mine.messageId] }), earlier);
    });

    test('the reply address comes before the headers', async () => {
      const earlier = (await sendAndDeliver({ reply_tracking: true })).replyAddress!;
      const earlierId = readReplyAddress(bed.t.app.signer, earlier)!;
      assert.equal(await find(org.id, { recipients: [earlier], inReplyTo: mine.messageId }), earlierId);
    });
  });

  test('end to end: a reply delivered over SMTP to the reply address is stored tied to its message', async () => {
    // The organization's domain receives mail, at an inbound listener on loopback.
    const enabled = await call('PATCH', `/domains/${await domainId(org)}`, { capabilities: { receiving: 'enabled' } });
    assert.equal(enabled.status, 200, JSON.stringify(enabled.body));
    const quiet = { error: () => {}, warn: () => {}, info: () => {} };
    const inbound = await startInboundServer({
      db: bed.t.db,
      signer: bed.t.app.signer,
      host: '127.0.0.1',
      port: 0,
      log: quiet,
    });
    try {
      const original = await sendAndDeliver({ reply_tracking: true });
      const to = replyToOf(original.copy)[0]!;
      const subject = `Re: ${original.copy.subject}`;
      const raw = [
        'From: Customer <customer@example.com>',
        `To: ${to}`,
        `Subject: ${subject}`,
        'Date: Tue, 3 Nov 2026 10:05:00 +0000',
        `Message-ID: <reply-${process.pid}@example.com>`,
        'MIME-Version: 1.0',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Yes please, ship it on Tuesday.',
        '',
        'On Mon, 3 Nov 2026 at 10:02, Acme <hello@acme.example> wrote:',
        '',
        '> Hello',
        '',
      ].join('\r\n');
      const client = smtpClient({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
      try {
        await client.sendMail({ envelope: { from: 'customer@example.com', to: [to] }, raw });
      } finally {
        client.close();
      }
      const { rows } = await bed.t.db.query<{ in_reply_to_email_id: string | null; stripped_text: string | null }>(
        'SELECT in_reply_to_email_id, stripped_text FROM received_emails WHERE organization_id = $1 AND subject = $2',
        [org.id, subject],
      );
      assert.deepEqual(rows, [{ in_reply_to_email_id: original.id, stripped_text: 'Yes please, ship it on Tuesday.' }]);
      // And as the API shows it.
      const listed = await call('GET', '/emails/receiving');
      const id = listed.body.data.find((entry: { subject: string }) => entry.subject === subject)?.id;
      const shown = await call('GET', `/emails/receiving/${id}`);
      assert.equal(shown.body.in_reply_to_email_id, original.id);
      assert.equal(shown.body.stripped_text, 'Yes please, ship it on Tuesday.');

      // A reply to an ordinary address of the domain (the send had no reply address) is tied by its
      // In-Reply-To: the Message-ID the sent message carried.
      const plain = await sendAndDeliver({});
      const byHeader = `Re: ${plain.copy.subject} (${process.pid})`;
      const headerReply = [
        'From: Customer <customer@example.com>',
        `To: support@${org.domain}`,
        `Subject: ${byHeader}`,
        `Message-ID: <reply-header-${process.pid}@example.com>`,
        `In-Reply-To: <${plain.id}@${org.domain}>`,
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Thanks, received.',
        '',
      ].join('\r\n');
      const second = smtpClient({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
      try {
        await second.sendMail({
          envelope: { from: 'customer@example.com', to: [`support@${org.domain}`] },
          raw: headerReply,
        });
      } finally {
        second.close();
      }
      const tied = await bed.t.db.query<{ in_reply_to_email_id: string | null }>(
        'SELECT in_reply_to_email_id FROM received_emails WHERE organization_id = $1 AND subject = $2',
        [org.id, byHeader],
      );
      assert.deepEqual(tied.rows, [{ in_reply_to_email_id: plain.id }]);
    } finally {
      await inbound.close();
    }
  });
});

describe('the reply without its quoted history and signature', () => {
  test('Gmail: "On <date> at <time>, <name> <address> wrote:" and > quotes', () => {
    const text = [
      'Thanks, Tuesday works for me.',
      '',
      'On Mon, 3 Nov 2026 at 10:02, Jane <jane@x.com> wrote:',
      '',
      '> Hi Bob,',
      '>',
      '> Can we meet on Tuesday?',
      '>',
      '> Jane',
      '',
    ].join('\n');
    assert.equal(stripQuotedText(text), 'Thanks, Tuesday works for me.');
    // A message that answers nothing (no In-Reply-To, References or reply address) is not searched for
    // quoted history: what looks like one is its own words; only a signature would go.
    assert.equal(stripQuotedText(text, false), text);
    assert.equal(stripQuotedText(`${text}\n-- \nBob\n`, false), text.trimEnd());
  });

  test('Gmail, with the attribution line wrapped', () => {
    const text = 'Thanks!\n\nOn Mon, 3 Nov 2026 at 10:02, Jane Doe <jane.doe@example.com>\nwrote:\n\n> Hi\n';
    assert.equal(stripQuotedText(text), 'Thanks!');
  });

  test('Outlook: "-----Original Message-----" then the From/Sent/To/Subject block (CRLF)', () => {
    const text = [
      'Sounds good, see you then.',
      '',
      'Bob',
      '',
      '-----Original Message-----',
      'From: Jane Doe <jane@x.com>',
      'Sent: Monday, November 3, 2026 10:02 AM',
      'To: Bob <bob@y.com>',
      'Subject: Meeting',
      '',
      'Hi Bob,',
      'Can we meet on Tuesday?',
      'Jane',
      '',
    ].join('\r\n');
    assert.equal(stripQuotedText(text), 'Sounds good, see you then.\n\nBob');
  });

  test('Outlook: the From/Sent/To/Subject block alone', () => {
    const text = [
      'Sounds good.',
      '',
      'From: Jane Doe <jane@x.com>',
      'Sent: Monday, November 3, 2026 10:02 AM',
      'To: Bob <bob@y.com>',
      'Subject: Meeting',
      '',
      'Can we meet on Tuesday?',
    ].join('\n');
    assert.equal(stripQuotedText(text), 'Sounds good.');
  });

  test('Apple Mail: "On <date>, at <time>, <name> <address> wrote:" then > quotes', () => {
    const text = [
      'Yes, Tuesday at 3.',
      '',
      'On 3 Nov 2026, at 10:02, Jane <jane@x.com> wrote:',
      '',
      '> Hi Bob,',
      '> Can we meet on Tuesday?',
      '',
    ].join('\n');
    assert.equal(stripQuotedText(text), 'Yes, Tuesday at 3.');
  });

  test('a signature after "-- " goes, in a reply and in a message that answers nothing', () => {
    assert.equal(
      stripQuotedText('Here is the report you asked for.\n\n-- \nBob Smith\nAcme Corp\n+1 555 0100\n'),
      'Here is the report you asked for.',
    );
    assert.equal(
      stripQuotedText(
        'Here it is.\n\n-- \nBob Smith\n\nOn Mon, 3 Nov 2026 at 10:02, Jane <jane@x.com> wrote:\n> send it\n',
      ),
      'Here it is.',
    );
  });

  test('a long text is stripped quickly: the reply before a long history, a long message left whole', () => {
    const history = '> an old line of the conversation, quoted again\n'.repeat(40_000);
    const reply = `Agreed.\n\nOn Mon, 3 Nov 2026 at 10:02, Jane <jane@x.com> wrote:\n${history}`;
    const long = 'A line of a long report that answers nothing.\n'.repeat(50_000);
    const started = Date.now();
    assert.equal(stripQuotedText(reply), 'Agreed.');
    assert.equal(stripQuotedText(long), long);
    assert.ok(
      Date.now() - started < 1000,
      `took ${Date.now() - started} ms for ${reply.length + long.length} characters`,
    );
  });

  test('a message that is not a reply is left as it is, its closing included', () => {
    const text = 'Hello team,\n\nThe release is out. Notes:\n- fixed the login bug\n- faster exports\n\nCheers,\nBob\n';
    assert.equal(stripQuotedText(text), text);
    assert.equal(stripQuotedText(''), '');
  });
});
