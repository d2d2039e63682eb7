import type { Config } from '../platform/config.ts';
import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { findSendingDomain } from '../domains/domains.ts';
import { isUuid, newRowId } from '../platform/ids.ts';
import { renderTemplate } from '../templates/render-template.ts';
import { senderDefaults } from '../templates/template-versions.ts';
import type { EmailMessage } from './message-schema.ts';
import { validateMessage, type Attachment, type ValidMessage } from './validate-message.ts';
import { attachmentFetcherFor, type AttachmentFetcher } from './attachment-fetch.ts';

/** A message that passed every check and is ready to be stored: what accept-messages.ts takes. */
export interface PreparedMessage extends ValidMessage {
  id: string;
  domainId: string;
  subject: string;
  messageId: string;
}

/** Checks one message against the spec's rules and the organization's data (domains, templates, topics). */
export async function prepareMessage(
  db: Queryable,
  config: Config,
  organizationId: string,
  message: EmailMessage,
  now: Date,
  fetchBudget: FetchBudget = newFetchBudget(config),
  /** The one domain the request's API key may send from (Resend's domain_id); null for any. */
  onlyFromDomainId: string | null = null,
): Promise<PreparedMessage> {
  // A template's from and reply_to are defaults: the send's own take precedence (Resend's rule).
  const defaults =
    message.template && (message.from === undefined || message.reply_to === undefined)
      ? await senderDefaults(db, organizationId, message.template.id)
      : undefined;
  const valid = validateMessage(
    defaults
      ? { ...message, from: message.from ?? defaults.from, reply_to: message.reply_to ?? defaults.replyTo }
      : message,
    { now, maxAttachmentBytes: config.attachmentsMaxBytes },
  );

  const domain = await findSendingDomain(db, organizationId, valid.from.domain);
  if (!domain) {
    throw new ServiceError(
      'invalid_from_address',
      `The domain ${valid.from.domain} is not a verified domain of this organization`,
      'from',
    );
  }
  if (onlyFromDomainId !== null && domain.id !== onlyFromDomainId) {
    throw await otherDomainRefusal(db, onlyFromDomainId, valid.from.domain);
  }

  let { subject, html, text } = valid;
  if (valid.template) {
    const rendered = await renderTemplate(db, organizationId, valid.template);
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

  if (valid.topicId !== undefined) {
    const { rowCount } = isUuid(valid.topicId)
      ? await db.query('SELECT 1 FROM topics WHERE id = $1 AND organization_id = $2', [valid.topicId, organizationId])
      : { rowCount: 0 };
    if (rowCount === 0) throw new ServiceError('validation_error', `Topic ${valid.topicId} not found`, 'topic_id');
  }

  // Last: a message refused for its sender, template or topic costs no fetch.
  await fetchAttachments(valid.attachments, attachmentFetcherFor(config), config.attachmentsMaxBytes, fetchBudget);

  const id = newRowId();
  return { ...valid, subject: subject!, html, text, id, domainId: domain.id, messageId: `<${id}@${domain.name}>` };
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
