import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { findTemplate } from '../templates/templates.ts';
import { findTopic } from '../contacts/topics.ts';
import { findSegment } from '../contacts/segments.ts';
import {
  CONNECTION_TYPES,
  MAX_STEPS,
  STEP_TYPES,
  type AutomationConnection,
  type AutomationGraph,
  type AutomationStep,
  type ConnectionType,
  type StepType,
} from './automation-model.ts';
import { checkedConfig, isObject, onlyFields, StepPlace } from './step-configs.ts';

// An automation's graph is checked whole before it is saved (create, a PATCH of steps and connections)
// and again when it is enabled (templates, topics and segments may have changed since). A refusal is a
// 400 naming the step by key and index and the field at fault (`steps[3].config.timeout`), or the
// connection by index (`connections[2].to`). What passes is stored as checked: each config holds only the
// fields of its step type, a connection always has its type (`default` when it was left out).
//
// Rules beyond each config's shape:
// - one trigger, and nothing connects into it (a run starts there and only there);
// - a connection's type fits the step it leaves: a condition leads on by condition_met and
//   condition_not_met, a wait_for_event by event_received (`default` means the same) and timeout, any
//   other step by default; several connections of one type from a step are branches a run takes together;
// - a loop must pass through a delay or a wait_for_event step: a loop without one would run its steps
//   again and again without pause.

export interface CheckedGraph extends AutomationGraph {
  /** The trigger's event name, kept on the automation to find what an event starts. */
  triggerEvent: string;
}

/** Steps that make a run pause: a loop through one of them is allowed. */
const PAUSING: readonly StepType[] = ['delay', 'wait_for_event'];

/** The connection types each step type leads on by; other types are refused. */
const LEADS_ON_BY: Record<StepType, readonly ConnectionType[]> = {
  trigger: ['default'],
  send_email: ['default'],
  delay: ['default'],
  wait_for_event: ['event_received', 'timeout', 'default'],
  condition: ['condition_met', 'condition_not_met'],
  contact_update: ['default'],
  contact_delete: ['default'],
  add_to_segment: ['default'],
};

const LEADS_ON_BY_SAID: Record<StepType, string> = {
  ...(Object.fromEntries(STEP_TYPES.map((type) => [type, 'default'])) as Record<StepType, string>),
  wait_for_event: 'event_received (default means the same) or timeout',
  condition: 'condition_met or condition_not_met',
};

const invalid = (field: string, message: string) => new ServiceError('validation_error', `${field}: ${message}`, field);

/** Where a refusal about a connection is. */
function refuseConnection(index: number, connection: Record<string, unknown>, field: string, message: string) {
  const from = JSON.stringify(connection.from);
  const to = JSON.stringify(connection.to);
  return new ServiceError(
    'validation_error',
    `connection from ${from} to ${to} (connections[${index}]): ${field}: ${message}`,
    `connections[${index}].${field}`,
  );
}

/** The graph's shape and rules, without the database: the graph to store. */
export function checkedGraphShape(steps: unknown, connections: unknown): CheckedGraph {
  if (!Array.isArray(steps) || steps.length === 0) {
    throw invalid('steps', 'must be a non-empty array of steps, one of them the trigger');
  }
  if (steps.length > MAX_STEPS) throw invalid('steps', `at most ${MAX_STEPS} steps in one automation`);
  if (!Array.isArray(connections)) throw invalid('connections', 'must be an array of connections (it may be empty)');

  const checkedSteps: AutomationStep[] = [];
  const indexOfKey = new Map<string, number>();
  let trigger: { index: number; event: string } | undefined;
  for (const [index, step] of steps.entries()) {
    if (!isObject(step)) throw invalid(`steps[${index}]`, 'must be an object with key, type and config');
    if (typeof step.key !== 'string' || step.key.trim() === '') {
      throw invalid(`steps[${index}].key`, 'must be a non-empty string naming the step');
    }
    const place = new StepPlace(index, step.key);
    const earlier = indexOfKey.get(step.key);
    if (earlier !== undefined) throw place.refuse('key', `steps[${earlier}] has the same key: keys are unique`);
    indexOfKey.set(step.key, index);
    onlyFields(step, ['key', 'type', 'config'], (field) =>
      place.refuse(field, 'unknown field: a step has key, type and config'),
    );
    if (typeof step.type !== 'string' || !(STEP_TYPES as readonly string[]).includes(step.type)) {
      throw place.refuse('type', `unknown step type ${JSON.stringify(step.type)}: one of ${STEP_TYPES.join(', ')}`);
    }
    const type = step.type as StepType;
    if (!isObject(step.config)) throw place.refuse('config', 'must be an object');
    const config = checkedConfig(place, type, step.config);
    if (type === 'trigger') {
      if (trigger) throw place.refuse('type', `steps[${trigger.index}] is the trigger already: an automation has one`);
      trigger = { index, event: config.event_name as string };
    }
    checkedSteps.push({ key: step.key, type, config });
  }
  if (!trigger) throw invalid('steps', 'no trigger step: one step of type "trigger" names the event that starts a run');

  const checkedConnections: AutomationConnection[] = [];
  const seenEdges = new Map<string, number>();
  for (const [index, connection] of connections.entries()) {
    if (!isObject(connection)) throw invalid(`connections[${index}]`, 'must be an object with from, to and type');
    const refuse = (field: string, message: string) => refuseConnection(index, connection, field, message);
    onlyFields(connection, ['from', 'to', 'type'], (field) =>
      refuse(field, 'unknown field: a connection has from, to and type'),
    );
    for (const end of ['from', 'to'] as const) {
      const key = connection[end];
      if (typeof key !== 'string' || !indexOfKey.has(key)) {
        throw refuse(end, `no step has the key ${JSON.stringify(key)}`);
      }
    }
    const from = checkedSteps[indexOfKey.get(connection.from as string)!]!;
    const to = checkedSteps[indexOfKey.get(connection.to as string)!]!;
    const type = connection.type ?? 'default';
    if (typeof type !== 'string' || !(CONNECTION_TYPES as readonly string[]).includes(type)) {
      throw refuse('type', `unknown connection type ${JSON.stringify(type)}: one of ${CONNECTION_TYPES.join(', ')}`);
    }
    if (to.type === 'trigger') throw refuse('to', 'nothing connects into the trigger: a run starts there');
    if (!LEADS_ON_BY[from.type].includes(type as ConnectionType)) {
      throw refuse('type', `a ${from.type} step leads on by ${LEADS_ON_BY_SAID[from.type]}, not ${type}`);
    }
    // The same connection twice would have a run enter its target twice each time (and a loop through a
    // delay double its steps at every turn).
    const effective = type === 'default' && from.type === 'wait_for_event' ? 'event_received' : type;
    const edge = `${from.key}\u0000${to.key}\u0000${effective}`;
    if (seenEdges.has(edge)) throw refuse('to', `connections[${seenEdges.get(edge)}] connects these steps already`);
    seenEdges.set(edge, index);
    checkedConnections.push({ from: from.key, to: to.key, type: type as ConnectionType });
  }
  checkLoops(checkedSteps, checkedConnections, indexOfKey);
  return { steps: checkedSteps, connections: checkedConnections, triggerEvent: trigger.event };
}

/** Refuses a loop that passes through no delay and no wait_for_event, naming the connection that closes it. */
function checkLoops(steps: AutomationStep[], connections: AutomationConnection[], indexOfKey: Map<string, number>) {
  // Without the pausing steps, any loop left is one that never pauses.
  const pausing = (key: string) => PAUSING.includes(steps[indexOfKey.get(key)!]!.type);
  const out = new Map<string, number[]>();
  for (const [index, connection] of connections.entries()) {
    if (pausing(connection.from) || pausing(connection.to)) continue;
    out.set(connection.from, [...(out.get(connection.from) ?? []), index]);
  }
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (key: string): void => {
    state.set(key, 'open');
    path.push(key);
    for (const index of out.get(key) ?? []) {
      const next = connections[index]!.to;
      if (state.get(next) === 'open') {
        const loop = [...path.slice(path.indexOf(next)), next].map((k) => JSON.stringify(k)).join(' → ');
        throw refuseConnection(
          index,
          connections[index] as unknown as Record<string, unknown>,
          'to',
          `closes the loop ${loop}, which passes through no delay or wait_for_event step: a run would go round it without pause`,
        );
      }
      if (state.get(next) === undefined) visit(next);
    }
    path.pop();
    state.set(key, 'done');
  };
  for (const step of steps) if (state.get(step.key) === undefined) visit(step.key);
}

/**
 * What the steps name in the organization: a send_email's template (by id or alias) published, its
 * topic_id an existing topic; an add_to_segment's segment an existing segment.
 */
export async function checkGraphReferences(db: Queryable, organizationId: string, graph: AutomationGraph) {
  for (const [index, step] of graph.steps.entries()) {
    const place = new StepPlace(index, step.key);
    if (step.type === 'send_email') {
      const { id } = step.config.template as { id: string };
      const template = await findTemplate(db, organizationId, id);
      if (!template)
        throw place.refuse(
          'config.template.id',
          `no template of this organization has the id or alias ${JSON.stringify(id)}`,
        );
      if (template.published_version_id === null) {
        throw place.refuse(
          'config.template.id',
          `template ${JSON.stringify(id)} is a draft: publish it first (a send uses its published version)`,
        );
      }
      const topicId = step.config.topic_id;
      if (typeof topicId === 'string' && !(await findTopic(db, organizationId, topicId))) {
        throw place.refuse('config.topic_id', `no topic of this organization has the id ${JSON.stringify(topicId)}`);
      }
    }
    if (step.type === 'add_to_segment') {
      const segmentId = step.config.segment_id as string;
      if (!isUuid(segmentId) || !(await findSegment(db, organizationId, segmentId))) {
        throw place.refuse(
          'config.segment_id',
          `no segment of this organization has the id ${JSON.stringify(segmentId)}`,
        );
      }
    }
  }
}

/** The whole check of a graph as given: its shape and rules, then what it names in the organization. */
export async function checkedGraph(
  db: Queryable,
  organizationId: string,
  steps: unknown,
  connections: unknown,
): Promise<CheckedGraph> {
  const graph = checkedGraphShape(steps, connections);
  await checkGraphReferences(db, organizationId, graph);
  return graph;
}
