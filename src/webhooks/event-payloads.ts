import { isBadMailbox } from '../suppressions/bad-mailbox.ts';

// The `data` of webhook events, in Resend's shapes (its OpenAPI `webhooks` and the webhook event types of
// its SDK, which win where the two disagree), so a receiver written for Resend reads Mailroom's events.
// Mailroom's own fields stay beside Resend's: none of Resend's event schemas forbids extra properties.
// The producers build the SQL parts in the statement that records the change, so an event shows the row
// as that statement left it (the outbox rule of fan-out.ts).

/** An SQL timestamptz as JavaScript's toISOString writes it (milliseconds, UTC): the API's own format. */
export const isoMillisSql = (expression: string) =>
  `to_char(${expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * A message's tags as Resend's webhooks give them, an object of strings, from the tags as they were sent
 * (an object, or a list of names and { name, value }): a name alone has the value 'true', as GET /emails/:id
 * reads it (emails/read-email.ts tagList), a value that is not
 * a string is written as JSON, the last of a repeated name wins, and a message without tags has {}.
 */
const tagsObjectSql = (tags: string) => `CASE jsonb_typeof(${tags})
    WHEN 'object' THEN coalesce((SELECT jsonb_object_agg(t.key, coalesce(t.value #>> '{}', '')) FROM jsonb_each(${tags}) t), '{}')
    WHEN 'array' THEN coalesce((SELECT jsonb_object_agg(
        CASE jsonb_typeof(t.tag) WHEN 'object' THEN t.tag ->> 'name' ELSE t.tag #>> '{}' END,
        CASE jsonb_typeof(t.tag) WHEN 'object' THEN coalesce(t.tag -> 'value' #>> '{}', '') ELSE 'true' END ORDER BY t.n)
      FROM jsonb_array_elements(${tags}) WITH ORDINALITY AS t(tag, n)
      WHERE CASE jsonb_typeof(t.tag) WHEN 'object' THEN t.tag ->> 'name' ELSE t.tag #>> '{}' END IS NOT NULL), '{}')
    ELSE '{}' END`;

/**
 * The message's part of an email.* event's data (Resend's OutboundEmailEventData and the SDK's
 * BaseEmailEventData): email_id, created_at (when the message was accepted), from, to (the message's To),
 * subject, message_id, tags, and headers, template_id and broadcast_id (a broadcast's copy, as Resend
 * gives it) when it has them. `message` names a row with the columns of `emails` (broadcast_id among
 * them); `createdAt` is its acceptance time when the row has no created_at column.
 */
export function emailEventFieldsSql(message: string, createdAt = `${message}.created_at`): string {
  return `(jsonb_build_object(
      'email_id', ${message}.id,
      'created_at', ${isoMillisSql(createdAt)},
      'from', ${message}."from",
      'to', ${message}."to",
      'subject', ${message}.subject,
      'message_id', ${message}.message_id,
      'tags', ${tagsObjectSql(`${message}.tags`)})
    || CASE WHEN jsonb_typeof(${message}.headers) = 'object' AND ${message}.headers <> '{}'::jsonb
         THEN jsonb_build_object('headers', (SELECT jsonb_agg(jsonb_build_object('name', h.key, 'value', h.value))
                                               FROM jsonb_each_text(${message}.headers) h))
         ELSE '{}'::jsonb END
    || CASE WHEN ${message}.template ->> 'id' IS NOT NULL
         THEN jsonb_build_object('template_id', ${message}.template ->> 'id') ELSE '{}'::jsonb END
    || CASE WHEN ${message}.broadcast_id IS NOT NULL
         THEN jsonb_build_object('broadcast_id', ${message}.broadcast_id) ELSE '{}'::jsonb END)`;
}

/** A happening of a message, as its timeline records it (emails/timeline.ts). */
export interface EmailHappening {
  kind: string;
  recipient?: string | null;
  data?: Record<string, unknown> | null;
}

/**
 * The happening's part of an email.* event's data, written over the message's part: its data as the
 * timeline keeps it, then, for an event about one recipient, `to` naming only that recipient (Resend's
 * "impacted recipients") and `recipient`, then the objects Resend's schema requires of its type:
 * `bounce`, `click`, `failed`, `suppressed`. `extra` holds what only the webhook carries.
 */
export function emailEventDetails(happening: EmailHappening, extra: Record<string, unknown> = {}) {
  const data = happening.data ?? {};
  const recipient = happening.recipient ? { to: [happening.recipient], recipient: happening.recipient } : {};
  const details: Record<string, unknown> = { ...data, ...recipient };
  if (happening.kind === 'bounced' && isRecord(data.bounce)) {
    details.bounce = resendBounce(data.bounce, typeof data.status === 'string' ? data.status : undefined);
  }
  if (happening.kind === 'clicked' && isRecord(data.click)) details.click = { ...data.click, ...asRecord(extra.click) };
  if (happening.kind === 'failed' && data.reason === 'suppressed') {
    details.suppressed = resendSuppressed(asRecord(extra.suppressed).origin);
  } else if (happening.kind === 'failed' && typeof data.reason === 'string') {
    details.failed = { reason: data.reason };
  }
  return details;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const asRecord = (value: unknown) => (isRecord(value) ? value : {});

/**
 * Resend's `bounce` (Amazon SES's vocabulary) from Mailroom's { type: hard|soft, smtp_code, diagnostic },
 * which stay beside it: hard is Permanent, soft Transient; subType from the enhanced status code (the
 * DSN's Status, else the one in the reply); diagnosticCode the reply as a DSN writes it.
 */
export function resendBounce(bounce: Record<string, unknown>, dsnStatus?: string) {
  const smtpCode = typeof bounce.smtp_code === 'number' ? bounce.smtp_code : null;
  const diagnostic = typeof bounce.diagnostic === 'string' ? bounce.diagnostic : '';
  const type = bounce.type === 'hard' ? 'Permanent' : bounce.type === 'soft' ? 'Transient' : 'Undetermined';
  const status = dsnStatus ?? /\b[245]\.\d{1,3}\.\d{1,3}\b/.exec(diagnostic)?.[0];
  return {
    ...bounce,
    type,
    subType: bounceSubType(type, status, smtpCode, diagnostic),
    message:
      diagnostic ||
      (type === 'Permanent'
        ? "The recipient's mail server permanently rejected the email."
        : "The recipient's mail server did not accept the email."),
    diagnosticCode: diagnostic ? [`smtp; ${diagnostic}`] : [],
  };
}

function bounceSubType(type: string, status: string | undefined, smtpCode: number | null, diagnostic: string) {
  if (type === 'Undetermined' || (status === undefined && smtpCode === null)) return 'Undetermined';
  const detail = status?.slice(status.indexOf('.'));
  if (detail === '.2.2') return 'MailboxFull';
  if (detail === '.3.4' || detail === '.2.3' || smtpCode === 552) return 'MessageTooLarge';
  if (
    type === 'Permanent' &&
    isBadMailbox({ smtpCode: smtpCode ?? undefined, response: `${status ?? ''} ${diagnostic}` })
  ) {
    return 'NoEmail';
  }
  return 'General';
}

/**
 * Resend's `suppressed`: the organization's own list (OnAccountSuppressionList). Resend's reasons are only
 * previous_bounce and previous_complaint, so an address added by hand reads previous_bounce, and
 * `origin` (bounce, complaint or manual, the SDK's word) tells which it was.
 */
export function resendSuppressed(origin: unknown) {
  const known = origin === 'bounce' || origin === 'complaint' || origin === 'manual' ? origin : 'manual';
  const why = { bounce: 'bounced before', complaint: 'complained before', manual: 'was added to it' }[known];
  return {
    type: 'OnAccountSuppressionList',
    reason: known === 'complaint' ? 'previous_complaint' : 'previous_bounce',
    origin: known,
    message: `The recipient is on your suppression list (it ${why}), so it was not sent to.`,
    diagnosticCode: [],
  };
}

/**
 * A domain.* event's data (Resend's DomainEventData) from a row with the columns of `domains`: id, name,
 * status, created_at, region and the DKIM and SPF records with their last-checked statuses, as
 * domains/domain-records.ts lists them (the DMARC record, not among Resend's record kinds, is left out;
 * GET /domains/:id shows it, and so are a custom return path's MX and a tracking subdomain's CNAME, which
 * point at hosts from the configuration). The SPF record is at the return path when the domain has one.
 * The region is the one the domain was added with (kept, not acted on).
 */
export function domainEventDataSql(domain: string): string {
  const record = (kind: string, name: string, value: string) =>
    `jsonb_build_object('record', '${kind}', 'name', ${name}, 'value', ${value}, 'type', 'TXT', 'ttl', 'Auto',
       'status', coalesce(${domain}.record_status ->> '${kind}', 'not_started'))`;
  return `jsonb_build_object(
      'id', ${domain}.id,
      'name', ${domain}.name,
      'status', ${domain}.status,
      'created_at', ${isoMillisSql(`${domain}.created_at`)},
      'region', ${domain}.region,
      'records', jsonb_build_array(
        ${record('DKIM', `${domain}.dkim_selector || '._domainkey.' || ${domain}.name`, `'v=DKIM1; k=rsa; p=' || ${domain}.dkim_public_key`)},
        ${record('SPF', `coalesce(${domain}.custom_return_path || '.', '') || ${domain}.name`, `'v=spf1 a mx ~all'`)}))`;
}

/**
 * A contact.* event's data (Resend's ContactEventData) from a row with the columns of `contacts`:
 * first_name and last_name only when set (Resend's schema has them as strings, never null), segment_ids
 * the segments the contact is in (oldest membership first), and audience_id the first of them, as
 * Resend gives it (left out when the contact is in none). `segmentIds` is a jsonb array of ids, given
 * when the statement itself writes the memberships (a new contact's), which it cannot yet read.
 */
export function contactEventDataSql(contact: string, segmentIds = contactSegmentIdsSql(contact)): string {
  return `jsonb_strip_nulls(jsonb_build_object(
      'id', ${contact}.id,
      'email', ${contact}.email,
      'first_name', ${contact}.first_name,
      'last_name', ${contact}.last_name,
      'unsubscribed', ${contact}.unsubscribed,
      'audience_id', (${segmentIds}) ->> 0,
      'created_at', ${isoMillisSql(`${contact}.created_at`)},
      'updated_at', ${isoMillisSql(`${contact}.updated_at`)}))
    || jsonb_build_object('segment_ids', ${segmentIds})`;
}

const contactSegmentIdsSql = (contact: string) =>
  `coalesce((SELECT jsonb_agg(cs.segment_id ORDER BY cs.created_at, cs.segment_id)
               FROM contact_segments cs WHERE cs.contact_id = ${contact}.id), '[]'::jsonb)`;

/**
 * broadcast.paused's data (Mailroom's own event) from a row with the columns of `broadcasts`: id, name,
 * status, pause_reason, the audience's counts as the snapshot took them, and `counts`, what the copies
 * had come to when it paused (`copies` with an outcome, `hard_bounces`, `complaints`), given by the
 * caller as a jsonb expression.
 */
export function broadcastPausedDataSql(broadcast: string, counts: string): string {
  return `jsonb_build_object(
      'id', ${broadcast}.id,
      'name', ${broadcast}.name,
      'status', ${broadcast}.status,
      'pause_reason', ${broadcast}.pause_reason,
      'audience_count', ${broadcast}.audience_count,
      'counts', ${counts},
      'created_at', ${isoMillisSql(`${broadcast}.created_at`)},
      'updated_at', ${isoMillisSql(`${broadcast}.updated_at`)})`;
}
