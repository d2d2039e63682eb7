import { createHash } from 'node:crypto';
import type { Database, Queryable } from '../platform/db/database.ts';
import type { Logger } from '../platform/logger.ts';
import type { Signer } from '../platform/signing.ts';
import { fanOutCtes } from '../webhooks/fan-out.ts';
import type { AuthenticationResults, Authenticator } from './authentication.ts';
import { parseReceived, type ParsedReceived } from './parse-received.ts';
import { findRepliedEmail, stripQuotedText } from './replies.ts';
import { queueRouteActions, routeMessage } from './routes.ts';
import type { SpamChecker, SpamVerdict } from './spam-check.ts';

// Storing a received message, once the listener has taken it (or anything else hands one over without
// SMTP: tests, benchmarks). One copy per organization among its recipients, each in one transaction with
// its raw bytes, its attachments, what its routes queued and its `email.received` event, so that nothing
// is ever half stored. The same bytes handed over again (a sender retrying after our 250 was lost)
// match the stored copy by (organization, SHA-256 of the raw message): nothing new is stored or fired.
//
// Parsing, the sender's authentication and the spam check are done once per message, before any
// transaction, and only when some organization has not stored it yet.

export interface ReceiveDeps {
  db: Database;
  signer: Signer;
  log: Logger;
  /** Unset: no authentication is checked (every result is recorded as none). */
  authenticate?: Authenticator | undefined;
  /** Unset: no spam filter. */
  spamCheck?: SpamChecker | undefined;
}

export interface ReceivedRecipient {
  address: string;
  organizationId: string;
  domainId: string;
}

export interface ReceiveInput {
  raw: Buffer;
  /** The SMTP MAIL FROM; '' for the null sender. */
  mailFrom: string;
  recipients: ReceivedRecipient[];
  clientAddress: string;
  helo: string;
  tls: boolean;
}

/** What was recorded when nothing could be checked. */
export const UNCHECKED: AuthenticationResults = {
  spf: { result: 'none', domain: null },
  dkim: [],
  dmarc: null,
  arc: { result: 'none' },
};

/** The received message's id at each organization (the stored one when it was already there). */
export async function receiveMessage(deps: ReceiveDeps, input: ReceiveInput): Promise<{ ids: string[] }> {
  const sha = createHash('sha256').update(input.raw).digest();
  const byOrganization = new Map<string, string[]>();
  for (const recipient of input.recipients) {
    const list = byOrganization.get(recipient.organizationId) ?? [];
    if (!list.some((address) => address.toLowerCase() === recipient.address.toLowerCase())) {
      list.push(recipient.address);
    }
    byOrganization.set(recipient.organizationId, list);
  }
  const organizations = [...byOrganization.keys()];
  if (organizations.length === 0) return { ids: [] };

  const stored = await storedIds(deps.db, organizations, sha);
  const missing = organizations.filter((org) => !stored.has(org));
  if (missing.length > 0) {
    const parsed = await parseReceived(input.raw);
    const sender = { clientAddress: input.clientAddress, helo: input.helo, mailFrom: input.mailFrom };
    const [authentication, spam] = await Promise.all([
      deps.authenticate ? checkAuthentication(deps, input.raw, sender) : UNCHECKED,
      deps.spamCheck ? checkSpam(deps, input, [...byOrganization.values()].flat()) : null,
    ]);
    const message: ReadMessage = { input, sha, parsed, authentication, spam };
    for (const organizationId of missing) {
      stored.set(
        organizationId,
        await storeForOrganization(deps, message, organizationId, byOrganization.get(organizationId)!),
      );
    }
  }
  return { ids: organizations.map((org) => stored.get(org)!) };
}

interface ReadMessage {
  input: ReceiveInput;
  sha: Buffer;
  parsed: ParsedReceived;
  authentication: AuthenticationResults;
  spam: SpamVerdict | null;
}

async function storedIds(db: Queryable, organizations: string[], sha: Buffer): Promise<Map<string, string>> {
  const { rows } = await db.query<{ organization_id: string; id: string }>(
    'SELECT organization_id, id FROM received_emails WHERE organization_id = ANY($1::uuid[]) AND raw_sha256 = $2',
    [organizations, sha],
  );
  return new Map(rows.map((row) => [row.organization_id, row.id]));
}

/** An authentication check that fails as a whole (it should not) leaves the message unchecked, not refused. */
async function checkAuthentication(
  deps: ReceiveDeps,
  raw: Buffer,
  sender: Parameters<Authenticator>[1],
): Promise<AuthenticationResults> {
  try {
    return await deps.authenticate!(raw, sender);
  } catch (error) {
    deps.log.warn({ err: error }, 'sender authentication could not be checked');
    return { ...UNCHECKED, spf: { result: 'temperror', domain: null }, arc: { result: 'none' } };
  }
}

async function checkSpam(deps: ReceiveDeps, input: ReceiveInput, recipients: string[]): Promise<SpamVerdict | null> {
  try {
    const { clientAddress, helo, mailFrom } = input;
    return await deps.spamCheck!(input.raw, { clientAddress, helo, mailFrom, recipients });
  } catch (error) {
    deps.log.warn({ err: error }, 'spam filter failed; the message is stored without a verdict');
    return null;
  }
}

async function storeForOrganization(
  deps: ReceiveDeps,
  message: ReadMessage,
  organizationId: string,
  recipients: string[],
): Promise<string> {
  const { db, signer } = deps;
  const { input, parsed, authentication, spam } = message;
  const [inReplyTo, routing] = await Promise.all([
    findRepliedEmail(db, signer, organizationId, {
      recipients,
      inReplyTo: parsed.inReplyTo,
      references: parsed.references,
    }),
    routeMessage(db, organizationId, recipients, parsed.headers),
  ]);
  const quarantined = spam?.quarantined ?? false;
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ id: string; created_at: string }>(
      `INSERT INTO received_emails (organization_id, raw_sha256, mail_from, received_for, from_address, to_addresses,
         cc_addresses, bcc_addresses, reply_to_addresses, subject, message_id, headers, html, text, stripped_text,
         size_bytes, client_address, helo, tls, authentication, spam_verdict, spam_score, quarantined,
         in_reply_to_email_id, routes)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
         $23, $24, $25)
       ON CONFLICT (organization_id, raw_sha256) DO NOTHING
       RETURNING id, ${TIMESTAMP('created_at')} AS created_at`,
      [
        organizationId,
        message.sha,
        input.mailFrom,
        recipients,
        parsed.from,
        parsed.to,
        parsed.cc,
        parsed.bcc,
        parsed.replyTo,
        parsed.subject,
        parsed.messageId,
        JSON.stringify(parsed.headers),
        parsed.html,
        parsed.text,
        parsed.text === null ? null : stripQuotedText(parsed.text),
        input.raw.length,
        input.clientAddress,
        input.helo,
        input.tls,
        JSON.stringify(authentication),
        spam?.verdict ?? null,
        spam?.score ?? null,
        quarantined,
        inReplyTo,
        JSON.stringify(routing.applied),
      ],
    );
    const row = rows[0];
    // Stored meanwhile by another session handing over the same bytes: that one announced it.
    if (!row) return (await storedIds(tx, [organizationId], message.sha)).get(organizationId)!;
    await tx.query('INSERT INTO received_email_raw (received_email_id, content) VALUES ($1, $2)', [row.id, input.raw]);
    const attachmentIds = await storeAttachments(tx, row.id, parsed);
    // Quarantined: kept for a person to look at, but neither forwarded nor announced.
    if (!quarantined) {
      const data = receivedEvent(row, recipients, parsed, attachmentIds);
      const event = await announce(tx, organizationId, data);
      // A route's own webhook endpoint gets the same event (same id) as the subscribers.
      await queueRouteActions(tx, organizationId, row.id, routing, { ...event, data });
    }
    return row.id;
  });
}

async function storeAttachments(tx: Queryable, emailId: string, parsed: ParsedReceived): Promise<string[]> {
  if (parsed.attachments.length === 0) return [];
  const { rows } = await tx.query<{ id: string }>(
    `INSERT INTO received_attachments
       (received_email_id, position, filename, content_type, content_disposition, content_id, size_bytes, content)
     SELECT $1, position, filename, content_type, content_disposition, content_id, size_bytes, content
       FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::bytea[])
            AS a(position, filename, content_type, content_disposition, content_id, size_bytes, content)
     ORDER BY position
     RETURNING id, position`,
    [
      emailId,
      parsed.attachments.map((_, index) => index),
      parsed.attachments.map((a) => a.filename),
      parsed.attachments.map((a) => a.contentType),
      parsed.attachments.map((a) => a.contentDisposition),
      parsed.attachments.map((a) => a.contentId),
      parsed.attachments.map((a) => a.content.length),
      parsed.attachments.map((a) => a.content),
    ],
  );
  const byPosition = new Map((rows as Array<{ id: string; position: number }>).map((r) => [r.position, r.id]));
  return parsed.attachments.map((_, index) => byPosition.get(index)!);
}

/** Timestamps in events as the fan-out writes them: UTC, microseconds. */
const TIMESTAMP = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** Fans `email.received` out to the subscribed endpoints; the event's id and time. */
async function announce(
  tx: Queryable,
  organizationId: string,
  data: Record<string, unknown>,
): Promise<{ id: string; created_at: string }> {
  const { rows } = await tx.query<{ id: string; created_at: string }>(
    `WITH event AS (SELECT gen_random_uuid() AS id, clock_timestamp() AS created_at)${fanOutCtes({
      org: '$1::uuid',
      type: "'email.received'::text",
      data: '$2::jsonb',
    })}
     SELECT id, ${TIMESTAMP('created_at')} AS created_at FROM event`,
    [organizationId, JSON.stringify(data)],
  );
  return rows[0]!;
}

/** Resend's `email.received` data: the message's metadata, never its body. */
export function receivedEvent(
  row: { id: string; created_at: string },
  recipients: string[],
  parsed: ParsedReceived,
  attachmentIds: string[],
): Record<string, unknown> {
  return {
    email_id: row.id,
    created_at: row.created_at,
    from: parsed.from,
    to: parsed.to,
    bcc: parsed.bcc,
    cc: parsed.cc,
    received_for: recipients,
    message_id: parsed.messageId,
    subject: parsed.subject,
    attachments: parsed.attachments.map((attachment, index) => ({
      id: attachmentIds[index],
      filename: attachment.filename,
      content_type: attachment.contentType,
      content_disposition: attachment.contentDisposition,
      content_id: attachment.contentId,
    })),
  };
}
