import type { Config } from '../platform/config.ts';
import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { findSendingDomain } from '../domains/domains.ts';
import { isUuid, newRowId } from '../platform/ids.ts';
import { renderPublishedVersion } from '../templates/render-template.ts';
import { findPublishedVersion, type PublishedVersion } from '../templates/template-versions.ts';
import type { EmailMessage } from './message-schema.ts';
import { validateMessage, type Attachment, type ValidMessage } from './validate-message.ts';
import { attachmentFetcherFor, type AttachmentFetcher } from './attachment-fetch.ts';
import { replyAddress as makeReplyAddress, signerOf } from './reply-address.ts';

/** A message that passed every check and is ready to be stored: what accept-messages.ts takes. */
export interface PreparedMessage extends ValidMessage {
  id: string;
  domainId: string;
  subject: string;
  messageId: string;
  /** The signed reply address it carries as Reply-To (emails/reply-address.ts); null or left out: none. */
  replyAddress?: string | null;
  /** The broadcast this message is a copy of (broadcasts/fan-out.ts); left out for any other send. */
  broadcastId?: string;
}

/**
 * What the messages of one request (a send, or a whole batch) share while they are prepared: the budget
 * for attachments given by URL, and the templates and topics already read, so that a send reads its
 * template once for its sender defaults and its rendering.
 */
export interface RequestScope {
  fetchBudget: FetchBudget;
  /** The published version (or its refusal) by the id or alias a message gave. */
  templates: Map<string, Promise<PublishedVersion>>;
  /** Whether the organization has the topic, by the id a message gave. */
  topics: Map<string, Promise<boolean>>;
  /** The one domain the request's API key may send from (Resend's domain_id); null for any. */
  onlyFromDomainId: string | null;
}

export const newRequestScope = (config: Config, onlyFromDomainId: string | null = null): RequestScope => ({
  fetchBudget: newFetchBudget(config),
  templates: new Map(),
  topics: new Map(),
  onlyFromDomainId,
});

/** Reads a value once per request: later messages asking for the same key get the same answer. */
function once<T>(cache: Map<string, Promise<T>>, key: string, read: () => Promise<T>): Promise<T> {
  let found = cache.get(key);
  if (!found) {
    found = read();
    // Whoever asks awaits it; this only keeps a refusal from counting as unhandled meanwhile.
    found.catch(() => {});
    cache.set(key, found);
  }
  return found;
}

/** Checks one message against the spec's rules and the organization's data (domains, templates, topics). */
export async function prepareMessage(
  db: Queryable,
  config: Config,
  organizationId: string,
  message: EmailMessage,
  now: Date,
  scope: RequestScope = newRequestScope(config),
): Promise<PreparedMessage> {
  const publishedVersion = (idOrAlias: string) =>
    once(scope.templates, idOrAlias, () => findPublishedVersion(db, organizationId, idOrAlias));

  // A template's from and reply_to are defaults: the send's own take precedence (Resend's rule). A
  // template that cannot be sent gives none; its rendering below says why, after the message's own checks,
  // unless the message has no from of its own: then why the template gives none is the first thing to say.
  const defaults =
    message.template && (message.from === undefined || message.reply_to === undefined)
      ? await publishedVersion(message.template.id).catch((error: unknown) => {
          if (error instanceof ServiceError && message.from !== undefined) return undefined;
          throw error;
        })
      : undefined;
  const valid = validateMessage(
    defaults
      ? {
          ...message,
          from: message.from ?? defaults.sender ?? undefined,
          reply_to: message.reply_to ?? defaults.reply_to ?? undefined,
        }
      : message,
    { now, maxAttachmentBytes: config.attachmentsMaxBytes, maxScheduleDays: config.maxScheduleDays },
  );

  const domain = await findSendingDomain(db, organizationId, valid.from.domain);
  if (!domain) {
    throw new ServiceError(
      'invalid_from_address',
      `The domain ${valid.from.domain} is not a verified domain of this organization`,
      'from',
    );
  }
  if (scope.onlyFromDomainId !== null && domain.id !== scope.onlyFromDomainId) {
    throw await otherDomainRefusal(db, scope.onlyFromDomainId, valid.from.domain);
  }

  let { subject, html, text } = valid;
  if (valid.template) {
    const rendered = renderPublishedVersion(await publishedVersion(valid.template.id), valid.template.variables);
    subject ??= rendered.subject ?? undefined;
    html = rendered.html ?? undefined;
    text = rendered.text ?? undefined;
    if (subject === undefined) {
      throw new ServiceError(
        'missing_required_field',
        'Missing required field: subject (the template has none)',
        'subject',
      );
    }
  }

  const topicId = valid.topicId;
  if (topicId !== undefined) {
    const found = await once(scope.topics, topicId, async () => {
      if (!isUuid(topicId)) return false;
      const sql = 'SELECT 1 FROM topics WHERE id = $1 AND organization_id = $2';
      return ((await db.query(sql, [topicId, organizationId])).rowCount ?? 0) > 0;
    });
    if (!found) throw new ServiceError('validation_error', `Topic ${topicId} not found`, 'topic_id');
  }

  // Last: a message refused for its sender, template or topic costs no fetch.
  await fetchAttachments(
    valid.attachments,
    attachmentFetcherFor(config),
    config.attachmentsMaxBytes,
    scope.fetchBudget,
  );

  const id = newRowId();
  // A reply address only where the sender asked for none of their own: a reply_to given (by the send
  // or its template) is where the sender wants replies, and one Reply-To is what replies follow.
  const replyAddress =
    (valid.replyTracking ?? domain.replyTracking) && valid.replyTo.length === 0
      ? makeReplyAddress(await signerOf(db), id, domain.name)
      : null;
  return {
    ...valid,
    subject: subject!,
    html,
    text,
    id,
    domainId: domain.id,
    messageId: `<${id}@${domain.name}>`,
    replyAddress,
  };
}

/**
 * The refusal of a From address at a domain the request's key is not limited to: the same code as a
 * domain that is not the organization's (from this key's view it is not one it may use). A key whose
 * domain was deleted keeps its limit and can send nothing.
 */
async function otherDomainRefusal(db: Queryable, keyDomainId: string, fromDomain: string): Promise<ServiceError> {
  const { rows } = await db.query<{ name: string }>('SELECT name FROM domains WHERE id = $1', [keyDomainId]);
  const keyDomain = rows[0]?.name;
  return new ServiceError(
    'invalid_from_address',
    keyDomain === undefined
      ? 'This API key is limited to a domain that has since been deleted: it can send nothing'
      : `This API key may send only from ${keyDomain}, not from ${fromDomain}`,
    'from',
  );
}

/**
 * What one request (a send, or a whole batch) may fetch for attachments given by URL: at most
 * MAX_FETCHES_PER_REQUEST files, and no more bytes than one request body may carry
 * (MAILROOM_BODY_LIMIT_BYTES), so a small request cannot make Mailroom fetch and hold gigabytes.
 */
export interface FetchBudget {
  fetches: number;
  bytes: number;
}

export const MAX_FETCHES_PER_REQUEST = 20;

export const newFetchBudget = (config: Config): FetchBudget => ({
  fetches: MAX_FETCHES_PER_REQUEST,
  bytes: config.bodyLimitBytes,
});

/**
 * Fills in the attachments given by URL, one after another, within what the attachments given inline
 * left of the size limit and what is left of the request's budget. Their Content-Type is the answer's
 * when the message gave none.
 */
async function fetchAttachments(
  list: Attachment[],
  fetcher: AttachmentFetcher,
  maxBytes: number,
  request: FetchBudget,
): Promise<void> {
  let budget = maxBytes - list.reduce((sum, attachment) => sum + attachment.content.length, 0);
  for (const attachment of list) {
    if (!attachment.source) continue;
    const { url, field, typeGiven } = attachment.source;
    if (request.fetches === 0) {
      throw new ServiceError(
        'validation_error',
        `At most ${MAX_FETCHES_PER_REQUEST} attachments given by path in one request; send the others as content`,
        field,
      );
    }
    request.fetches -= 1;
    const fetched = await fetcher.fetch(url, {
      field,
      maxBytes: Math.min(budget, request.bytes),
      totalLimit: request.bytes < budget ? request.bytes : maxBytes,
    });
    budget -= fetched.content.length;
    request.bytes -= fetched.content.length;
    attachment.content = fetched.content;
    if (!typeGiven && fetched.contentType && fetched.contentType !== 'application/octet-stream') {
      attachment.contentType = fetched.contentType;
    }
    delete attachment.source;
  }
}
