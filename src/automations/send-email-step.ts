import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { idempotencyKey } from '../platform/idempotency.ts';
import { isFinalRefusal, ServiceError } from '../platform/errors.ts';
import { addressKey } from '../platform/address-key.ts';
import { subscribedAddresses } from '../contacts/subscriptions.ts';
import { sendEmails } from '../emails/send-emails.ts';
import type { EmailMessage } from '../emails/message-schema.ts';
import type { AutomationStep } from './automation-model.ts';
import { resolveVariables } from './instant-steps.ts';
import type { RuleContext } from './condition-rules.ts';

// A send_email step sends one message through the accept path every send takes (POST /emails): it gets
// an id, a timeline, webhooks, the suppression list's check at delivery, topics and the unsubscribe link.
// It is sent with an idempotency key made of the run and the step's number, and the accept path stores
// the message and remembers its result under that key in one commit: a step job run again after its
// worker died between the send and the step's own commit gets the same message back, not a second one.

/** A limit refused a step's message (rate, quota): it is tried again this much later. */
const LIMIT_RETRY_MS = 30_000;
/** The step's message is claimed by a send still in progress, or by a dead worker's about to run out. */
const CLAIM_RETRY_MS = 1000;

export type SendStepResult =
  | { kind: 'sent'; emailId: string }
  | { kind: 'skipped'; reason: 'unsubscribed' | 'suppressed' | 'contact_deleted'; detail?: Record<string, unknown> }
  | { kind: 'failed'; error: Record<string, unknown> }
  | { kind: 'retry'; reason: string; afterMs: number };

export interface SendStepRun {
  id: string;
  organizationId: string;
  automationId: string;
  contactId: string;
  eventPayload: Record<string, unknown>;
}

/**
 * The key a step's message is accepted under: one per (run, step number). Its claim lasts as long as the
 * step job's lease: only the job's holder sends, and a job taken over after its worker died finds the
 * dead worker's claim over too, instead of waiting out the minute an HTTP request's claim lasts.
 */
export const stepIdempotencyKey = (organizationId: string, runId: string, seq: number, leaseSeconds: number) => ({
  ...idempotencyKey(organizationId, `automation-step:${runId}:${seq}`, {
    kind: 'automation',
    target: 'send_email',
    body: { run_id: runId, seq },
  }),
  leaseSeconds,
});

export async function sendEmailStep(
  db: Database,
  config: Config,
  run: SendStepRun,
  seq: number,
  step: AutomationStep,
): Promise<SendStepResult> {
  const contact = await contactToSend(db, run);
  if (!contact) return { kind: 'skipped', reason: 'contact_deleted' };
  const refusal = await whyNotSend(db, run.organizationId, contact, step.config.topic_id);
  if (refusal) return refusal;
  const context: RuleContext = { event: run.eventPayload, contact };

  const template = step.config.template as { id: string; variables?: Record<string, unknown> };
  const message: EmailMessage = {
    to: [contact.email],
    template: { id: template.id, variables: templateVariables(template.variables ?? {}, context) },
    tags: [
      { name: 'automation_id', value: run.automationId },
      { name: 'automation_run_id', value: run.id },
    ],
  };
  if (typeof step.config.subject === 'string') message.subject = step.config.subject;
  if (typeof step.config.from === 'string') message.from = step.config.from;
  if (typeof step.config.reply_to === 'string') message.reply_to = step.config.reply_to;
  if (typeof step.config.topic_id === 'string') message.topic_id = step.config.topic_id;

  let outcome;
  try {
    outcome = await sendEmails(
      db,
      config,
      run.organizationId,
      { kind: 'single', message },
      stepIdempotencyKey(run.organizationId, run.id, seq, config.jobLeaseSeconds),
    );
  } catch (error) {
    // The claim of a worker that died while sending this step has not quite run out: soon it has.
    if (error instanceof ServiceError && error.name === 'concurrent_idempotent_requests') {
      return { kind: 'retry', reason: error.message, afterMs: CLAIM_RETRY_MS };
    }
    throw error;
  }
  const result = outcome.result;
  if ('entries' in result) {
    const entry = result.entries[0]!;
    if (entry.accepted) return { kind: 'sent', emailId: entry.id };
    return refusedSend(entry.error);
  }
  return refusedSend(result.refused);
}

/**
 * The step's template variables with each `{ "var": … }` read; one that reads nothing (a contact without
 * a first name) is left out, so the template's fallback value applies.
 */
function templateVariables(variables: Record<string, unknown>, context: RuleContext): Record<string, unknown> {
  const resolved = resolveVariables(variables, context) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(resolved).filter(([, value]) => value !== null && value !== undefined));
}

/** A refusal that the same message would meet again fails the step; a limit's waits and tries again. */
function refusedSend(error: {
  name: Parameters<typeof isFinalRefusal>[0];
  message: string;
  field?: string;
}): SendStepResult {
  if (isFinalRefusal(error.name)) return { kind: 'failed', error: { ...error } };
  return { kind: 'retry', reason: `${error.name}: ${error.message}`, afterMs: LIMIT_RETRY_MS };
}

interface ContactToSend {
  email: string;
  first_name: string | null;
  last_name: string | null;
  unsubscribed: boolean;
  properties: Record<string, unknown>;
  /** Why its address is on the suppression list, if it is. */
  suppression_reason: string | null;
}

/** The run's contact as it is now, with whether its address is suppressed, in one read. */
async function contactToSend(db: Queryable, run: SendStepRun): Promise<ContactToSend | undefined> {
  // Contacts hold addresses as parsed (ASCII throughout): lower(email) is the suppression list's key.
  const { rows } = await db.query<ContactToSend>(
    `SELECT c.email, c.first_name, c.last_name, c.unsubscribed, coalesce(c.properties, '{}'::jsonb) AS properties,
            s.reason AS suppression_reason
       FROM contacts c
       LEFT JOIN suppressions s ON s.organization_id = c.organization_id AND s.address = lower(c.email)
      WHERE c.id = $1 AND c.organization_id = $2`,
    [run.contactId, run.organizationId],
  );
  return rows[0];
}

/** Why the contact must not get the step's message: unsubscribed (from all, or from its topic), or suppressed. */
async function whyNotSend(
  db: Queryable,
  organizationId: string,
  contact: ContactToSend,
  topicId: unknown,
): Promise<SendStepResult | undefined> {
  if (contact.unsubscribed) return { kind: 'skipped', reason: 'unsubscribed' };
  if (typeof topicId === 'string') {
    const subscribed = await subscribedAddresses(db, organizationId, topicId, [contact.email]);
    if (!subscribed.has(addressKey(contact.email))) {
      return { kind: 'skipped', reason: 'unsubscribed', detail: { topic_id: topicId } };
    }
  }
  if (contact.suppression_reason !== null) {
    return { kind: 'skipped', reason: 'suppressed', detail: { suppression_reason: contact.suppression_reason } };
  }
  return undefined;
}
