import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { deleteContact, updateContactIn, type ContactInput } from '../contacts/contacts.ts';
import { addToSegment } from '../contacts/segments.ts';
import type { AutomationGraph, AutomationStep, ConnectionType } from './automation-model.ts';
import { checkRule, fieldValue, isVariable, ruleHolds, type RuleContext } from './condition-rules.ts';

// The steps that take no time: each runs inside the transaction that enters it (run-graph.ts), so what
// it changes (a contact, a membership) commits exactly once, with the step's row.

export interface StepOutcome {
  status: 'completed' | 'failed' | 'skipped';
  output?: Record<string, unknown> | null;
  error?: Record<string, unknown> | null;
  /** The connections to follow: `default` unless the step chooses (a condition). */
  follow?: ConnectionType;
  /** The run ends here (its contact was deleted). */
  endsRun?: boolean;
}

interface RunOfStep {
  organizationId: string;
  contactId: string;
  eventPayload: Record<string, unknown>;
  graph: AutomationGraph;
}

export async function runInstantStep(tx: Queryable, run: RunOfStep, step: AutomationStep): Promise<StepOutcome> {
  try {
    switch (step.type) {
      case 'trigger':
        return { status: 'completed', output: { event_name: step.config.event_name, payload: run.eventPayload } };
      case 'condition': {
        const rule = checkRule(step.config, 'config');
        const met = ruleHolds(rule, await ruleContext(tx, run, run.eventPayload));
        return { status: 'completed', output: { met }, follow: met ? 'condition_met' : 'condition_not_met' };
      }
      case 'contact_update': {
        const context = await ruleContext(tx, run, run.eventPayload);
        const changes = contactChanges(step.config, context);
        await updateContactIn(tx, run.organizationId, run.contactId, changes);
        return { status: 'completed', output: { contact_id: run.contactId, changed: Object.keys(changes) } };
      }
      case 'contact_delete':
        await deleteContact(tx, run.organizationId, run.contactId).catch((error: unknown) => {
          // Already gone: the run ends all the same.
          if (!(error instanceof ServiceError && error.name === 'not_found')) throw error;
        });
        return { status: 'completed', output: { contact_id: run.contactId, deleted: true }, endsRun: true };
      case 'add_to_segment': {
        const segmentId = String(step.config.segment_id);
        await addToSegment(tx, run.organizationId, run.contactId, segmentId);
        return { status: 'completed', output: { segment_id: segmentId } };
      }
      default:
        throw new Error(`step type ${step.type} is not instant`);
    }
  } catch (error) {
    // What the organization's data refuses (a segment deleted, a property that no longer exists) fails the
    // step, and the run, with the reason; anything else (the database) is retried by the job.
    if (error instanceof ServiceError) return { status: 'failed', error: { ...error.detail() } };
    throw error;
  }
}

/** What rules and `{ "var": … }` values read: the event's payload and the run's contact as it is now. */
export async function ruleContext(
  tx: Queryable,
  run: { organizationId: string; contactId: string },
  payload: Record<string, unknown>,
): Promise<RuleContext> {
  const { rows } = await tx.query<{
    email: string;
    first_name: string | null;
    last_name: string | null;
    unsubscribed: boolean;
    properties: Record<string, unknown> | null;
  }>(
    `SELECT email, first_name, last_name, unsubscribed, properties FROM contacts
      WHERE id = $1 AND organization_id = $2`,
    [run.contactId, run.organizationId],
  );
  const contact = rows[0];
  return { event: payload, contact: contact ? { ...contact, properties: contact.properties ?? {} } : null };
}

/** A value with every `{ "var": "<field>" }` in it replaced by what the field reads (null when nothing). */
export function resolveVariables(value: unknown, context: RuleContext): unknown {
  if (isVariable(value)) return fieldValue(value.var, context) ?? null;
  if (Array.isArray(value)) return value.map((item) => resolveVariables(item, context));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, resolveVariables(inner, context)]));
  }
  return value;
}

function contactChanges(config: Record<string, unknown>, context: RuleContext): ContactInput {
  const changes: ContactInput = {};
  const text = (value: unknown) => (value === null || value === undefined ? null : String(value));
  if (config.first_name !== undefined) changes.first_name = text(resolveVariables(config.first_name, context));
  if (config.last_name !== undefined) changes.last_name = text(resolveVariables(config.last_name, context));
  if (config.unsubscribed !== undefined) {
    const value = resolveVariables(config.unsubscribed, context);
    changes.unsubscribed = value === true || value === 'true';
  }
  if (config.properties !== undefined && typeof config.properties === 'object' && config.properties !== null) {
    changes.properties = resolveVariables(config.properties, context) as Record<string, unknown>;
  }
  return changes;
}
