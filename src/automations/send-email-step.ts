import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { isFinalRefusal, ServiceError } from '../platform/errors.ts';
import { addressKey } from '../platform/address-key.ts';
import { subscribedAddresses } from '../contacts/subscriptions.ts';
import { writeAcceptances, type Acceptance } from '../emails/group-commit.ts';
import type { EmailMessage } from '../emails/message-schema.ts';
import { newRequestScope, prepareMessage, type PreparedMessage, type RequestScope } from '../emails/prepare-message.ts';
import type { AutomationStep } from './automation-model.ts';
import { resolveVariables } from './instant-steps.ts';
import type { RuleContext } from './condition-rules.ts';
import { throughLookupsOf } from '../platform/db/lookup-cache.ts';

// A send_email step's message goes through the accept path every send takes (POST /emails): it is
// checked and rendered as one, takes the organization's rate limit and monthly quota, and is stored with
// its recipients, timeline, webhook events and delivery job by the same statement (so it has an id, a
// timeline, webhooks, the suppression list's check at delivery, topics and the unsubscribe link). It is
// stored in the transaction that settles the step and walks on (step-jobs.ts): the message exists if and
// only if the step is done, so a step job run again after its worker died sends nothing twice and loses
// nothing. The send steps due together are stored together, one statement for all their messages.

/** A limit refused a step's message (rate, quota): it is tried again this much later. */
const LIMIT_RETRY_MS = 30_000;

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

export interface ContactToSend {
  email: string;
  first_name: string | null;
  last_name: string | null;
  unsubscribed: boolean;
  properties: Record<string, unknown>;
  /** Why its address is on the suppression list, if it is. */
  suppression_reason: string | null;
}

/** A send step due: its run, the step, and the run's contact as it is now (undefined: deleted). */
export interface SendStep {
  run: SendStepRun;
  step: AutomationStep;
  contact: ContactToSend | undefined;
}

/**
 * Sends the steps' messages in the caller's transaction (on `db`): one result per step, in order. A
 * message refused for good fails its step; one a limit refused is tried again later; nothing is stored
 * for either. `tokens` holds the rate limit's tokens taken for them, by organization: each message sent
 * uses one, and what is left is the caller's to give back.
 */
export async function sendEmailSteps(
  tx: Queryable,
  db: Database,
  tokens: Map<string, number>,
  config: Config,
  steps: SendStep[],
  now: Date,
): Promise<SendStepResult[]> {
  const results: Array<SendStepResult | undefined> = [];
  const prepared: Array<{ index: number; organizationId: string; message: PreparedMessage }> = [];
  const scopes = new Map<string, RequestScope>();
  // Sending domains and the like are read through the process's caches, as every send reads them.
  const reads = throughLookupsOf(db, tx);
  for (const [index, { run, step, contact }] of steps.entries()) {
    const refusal = contact
      ? await whyNotSend(tx, run.organizationId, contact, step.config.topic_id)
      : ({ kind: 'skipped', reason: 'contact_deleted' } as const);
    if (refusal) {
      results[index] = refusal;
      continue;
    }
    let scope = scopes.get(run.organizationId);
    if (!scope) scopes.set(run.organizationId, (scope = newRequestScope(config)));
    try {
      const message = await prepareMessage(
        reads,
        config,
        run.organizationId,
        stepMessage(run, step, contact!),
        now,
        scope,
      );
      prepared.push({ index, organizationId: run.organizationId, message });
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      results[index] = refusedSend(error.detail());
    }
  }
  // The rate limit: the messages past the tokens taken wait for a retry.
  const granted: typeof prepared = [];
  for (const p of prepared) {
    const left = tokens.get(p.organizationId) ?? 0;
    if (left > 0) {
      tokens.set(p.organizationId, left - 1);
      granted.push(p);
    } else results[p.index] = { kind: 'retry', reason: 'rate_limit_exceeded', afterMs: LIMIT_RETRY_MS };
  }
  const acceptances: Acceptance[] = granted.map((p) => ({
    organizationId: p.organizationId,
    messages: [p.message],
    allOrNothing: true,
    idempotency: undefined,
    resultOf: () => undefined,
  }));
  const accepted = acceptances.length > 0 ? await writeAcceptances(tx, acceptances) : [];
  for (const [i, p] of granted.entries()) {
    if (accepted[i]! > 0) {
      results[p.index] = { kind: 'sent', emailId: p.message.id };
      continue;
    }
    results[p.index] = { kind: 'retry', reason: 'monthly_quota_exceeded', afterMs: LIMIT_RETRY_MS };
    tokens.set(p.organizationId, (tokens.get(p.organizationId) ?? 0) + 1);
  }
  return results.map((result) => result!);
}

/** The step's message to the run's contact, tagged with the automation and the run. */
function stepMessage(run: SendStepRun, step: AutomationStep, contact: ContactToSend): EmailMessage {
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
  return message;
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
