import { createHash, randomUUID } from 'node:crypto';
import type { Database, Queryable } from '../platform/db/database.ts';
import { batcherPerDatabase } from '../platform/db/batcher.ts';
import type { Logger } from '../platform/logger.ts';
import type { Signer } from '../platform/signing.ts';
import { fanOutCtes } from '../webhooks/fan-out.ts';
import type { AuthenticationResults, Authenticator } from './authentication.ts';
import { parseReceived, storableText, type ParsedReceived } from './parse-received.ts';
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
// transaction.

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

/** A message the MIME parser cannot read at all: refused for good (554) rather than retried for days. */
export class UnreadableMessage extends Error {
  override name = 'UnreadableMessage';
}

/** The received message's id at each organization (the stored one when it was already there). */
export async function receiveMessage(deps: ReceiveDeps, given: ReceiveInput): Promise<{ ids: string[] }> {
  // What the client said in the envelope may hold what PostgreSQL text cannot (NUL): kept storable.
  const input: ReceiveInput = {
    ...given,
    mailFrom: storableText(given.mailFrom),
    helo: storableText(given.helo),
    recipients: given.recipients.map((recipient) => ({ ...recipient, address: storableText(recipient.address) })),
  };
  const rawDigest = createHash('sha256').update(input.raw).digest();
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

  // No look-up first for a copy already stored: a message handed over again is rare, and the insert
  // finds it anyway (ON CONFLICT), so the usual message saves a round trip.
  let parsed: ParsedReceived;
  try {
    parsed = await parseReceived(input.raw);
  } catch (error) {
    // mailparser gives up on what no mail client sends (over 1,000 MIME parts, a 1 MiB header block):
    // said so for good, since it would fail the same way on every retry.
    throw new UnreadableMessage(error instanceof Error ? error.message : String(error));
  }
  const sender = { clientAddress: input.clientAddress, helo: input.helo, mailFrom: input.mailFrom };
  const [authentication, spam] = await Promise.all([
    deps.authenticate ? checkAuthentication(deps, input.raw, sender) : UNCHECKED,
    deps.spamCheck ? checkSpam(deps, input, [...byOrganization.values()].flat()) : null,
  ]);
  const message: ReadMessage = { input, rawDigest, parsed, authentication, spam };
  const stored = new Map<string, string>();
  for (const organizationId of organizations) {
    stored.set(
      organizationId,
      await storeForOrganization(deps, message, organizationId, byOrganization.get(organizationId)!),
    );
  }
  return { ids: organizations.map((org) => stored.get(org)!) };
}

/**
 * What makes a stored copy the same one (received_emails.store_key): the raw bytes and the recipients
 * they were taken for. The same transaction handed over again (a sender retrying after our 250 was lost)
 * is the same copy; the same bytes for other recipients (a sender splitting a long recipient list into
 * several transactions, or retrying one recipient refused for a while) are stored and routed for those.
 */
function storeKey(rawDigest: Buffer, recipients: string[]): Buffer {
  const hash = createHash('sha256').update(rawDigest);
  for (const address of recipients.map((recipient) => recipient.toLowerCase()).sort()) hash.update(`\n${address}`);
  return hash.digest();
}

interface ReadMessage {
  input: ReceiveInput;
  /** SHA-256 of the raw bytes. */
  rawDigest: Buffer;
  parsed: ParsedReceived;
  authentication: AuthenticationResults;
  spam: SpamVerdict | null;
}

async function storedIds(db: Queryable, organizations: string[], sha: Buffer): Promise<Map<string, string>> {
  const { rows } = await db.query<{ organization_id: string; id: string }>(
    'SELECT organization_id, id FROM received_emails WHERE organization_id = ANY($1::uuid[]) AND store_key = $2',
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
  const key = storeKey(message.rawDigest, recipients);
  const [inReplyTo, routing] = await Promise.all([
    findRepliedEmail(db, signer, organizationId, {
      recipients,
      inReplyTo: parsed.inReplyTo,
      references: parsed.references,
    }),
    routeMessage(db, organizationId, recipients, parsed.headers),
  ]);
  const quarantined = spam?.quarantined ?? false;
  const answersSomething = parsed.inReplyTo !== undefined || parsed.references.length > 0 || inReplyTo !== null;
  const strippedText = parsed.text === null ? null : stripQuotedText(parsed.text, answersSomething);
  // Ids made here, so that the event's data (which names them) is written by the statement that stores.
  const id = randomUUID();
  const attachmentIds = parsed.attachments.map(() => randomUUID());
  const data = receivedEvent({ id, created_at: '' }, recipients, parsed, attachmentIds);
  const values = [
    id,
    organizationId,
    key,
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
    strippedText,
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
    input.raw,
    attachmentIds,
    parsed.attachments.map((a) => a.filename),
    parsed.attachments.map((a) => a.contentType),
    parsed.attachments.map((a) => a.contentDisposition),
    parsed.attachments.map((a) => a.contentId),
    parsed.attachments.map((a) => a.content.length),
    parsed.attachments.map((a) => a.content),
    JSON.stringify(data),
  ];
  const copy = { organizationId, key, values, data, routing, rawBytes: input.raw.length };
  if (db.kind === 'pglite') return copyWriter(db).add(copy);
  return db.transaction((tx) => storeCopy(tx, copy));
}

/** A copy ready to be stored: the statement's values, and what its routes and event need after it. */
interface CopyToStore {
  organizationId: string;
  key: Buffer;
  values: unknown[];
  data: Record<string, unknown>;
  routing: Awaited<ReturnType<typeof routeMessage>>;
  rawBytes: number;
}

// On PGlite, copies handed over while a transaction is being written wait, and the next transaction
// stores all of them (a group commit, as the accept path's): its one connection ran every session's
// transaction in turn anyway, each with a commit of its own. Each session is answered only after the
// commit that holds its copy. When a group fails, each copy is stored again alone, so that only the one
// at fault fails (platform/db/batcher.ts). On PostgreSQL each copy has its own transaction, and sessions
// write in parallel on the pool's connections.
const MAX_GROUP_COPIES = 50;
const MAX_GROUP_BYTES = 64 * 1024 * 1024;
const copyWriter = batcherPerDatabase<CopyToStore, string>({
  run: async (tx, copies) => {
    const ids: string[] = [];
    for (const copy of copies) ids.push(await storeCopy(tx, copy));
    return ids;
  },
  maxSize: MAX_GROUP_COPIES,
  bytes: (copy) => copy.rawBytes,
  maxBytes: MAX_GROUP_BYTES,
});

async function storeCopy(tx: Queryable, copy: CopyToStore): Promise<string> {
  const { organizationId, key, values, data, routing } = copy;
  // One statement: the row, its raw bytes, its attachments and (unless quarantined: kept for a person
  // to look at, neither announced nor forwarded) its email.received event, or nothing at all when the
  // same bytes are already stored for this organization.
  const { rows } = await tx.query<{
    id: string;
    created_at: string;
    event_id: string | null;
    event_at: string | null;
  }>(
    `WITH stored AS (
       INSERT INTO received_emails (id, organization_id, store_key, mail_from, received_for, from_address,
         to_addresses, cc_addresses, bcc_addresses, reply_to_addresses, subject, message_id, headers, html, text,
         stripped_text, size_bytes, client_address, helo, tls, authentication, spam_verdict, spam_score,
         quarantined, in_reply_to_email_id, routes)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
         $23, $24, $25, $26)
       ON CONFLICT (organization_id, store_key) DO NOTHING
       RETURNING id, created_at
     ),
     raw AS (INSERT INTO received_email_raw (received_email_id, content) SELECT id, $27 FROM stored),
     attachments AS (
       INSERT INTO received_attachments
         (id, received_email_id, position, filename, content_type, content_disposition, content_id, size_bytes,
          content)
       SELECT a.id, stored.id, a.position - 1, a.filename, a.content_type, a.content_disposition, a.content_id,
              a.size_bytes, a.content
         FROM stored,
              unnest($28::uuid[], $29::text[], $30::text[], $31::text[], $32::text[], $33::int[], $34::bytea[])
                WITH ORDINALITY AS a(id, filename, content_type, content_disposition, content_id, size_bytes,
                                     content, position)
     ),
     event AS (SELECT gen_random_uuid() AS id, clock_timestamp() AS created_at FROM stored WHERE NOT $24)${fanOutCtes({
       org: '$2::uuid',
       type: "'email.received'::text",
       data: `($35::jsonb || jsonb_build_object('created_at', (SELECT ${TIMESTAMP('created_at')} FROM stored)))`,
     })}
     SELECT stored.id, ${TIMESTAMP('stored.created_at')} AS created_at, event.id AS event_id, ${TIMESTAMP('event.created_at')} AS event_at
       FROM stored LEFT JOIN event ON true`,
    values,
  );
  const row = rows[0];
  // Stored meanwhile by another session handing over the same bytes: that one announced it.
  if (!row) return (await storedIds(tx, [organizationId], key)).get(organizationId)!;
  if (row.event_id !== null && row.event_at !== null) {
    // A route's own webhook endpoint gets the same event (same id) as the subscribers.
    const event = { id: row.event_id, created_at: row.event_at, data: { ...data, created_at: row.created_at } };
    await queueRouteActions(tx, organizationId, row.id, routing, event);
  }
  return row.id;
}

/** Timestamps in events as the fan-out writes them: UTC, microseconds. */
const TIMESTAMP = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

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
