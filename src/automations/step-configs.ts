import { ServiceError } from '../platform/errors.ts';
import { RESERVED_EVENT_PREFIX, type StepType } from './automation-model.ts';
import { checkedDuration } from './durations.ts';
import { checkRule, isVariable } from './condition-rules.ts';
import { MAX_EVENT_NAME_LENGTH as MAX_EVENT_NAME } from './event-schema.ts';

// Each step type's config, checked on its own: what a step of that type may hold, stored as checked (only
// the fields of its type). A refusal names the step by key and index and the field at fault
// (`step "wait" (steps[3]): config.timeout: …`, field `steps[3].config.timeout`). The graph as a whole
// (automation-graph.ts) is checked after each step's config.

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Where a refusal inside a step is: its key and index, then the field within it. */
export class StepPlace {
  readonly index: number;
  readonly key: string;
  constructor(index: number, key: string) {
    this.index = index;
    this.key = key;
  }

  refuse(field: string, message: string): ServiceError {
    return new ServiceError(
      'validation_error',
      `step ${JSON.stringify(this.key)} (steps[${this.index}]): ${field}: ${message}`,
      `steps[${this.index}].${field}`,
    );
  }

  /** Runs a check that names fields inside the step (`config.timeout`), placing its refusal in the step. */
  within<T>(check: () => T): T {
    try {
      return check();
    } catch (error) {
      if (!(error instanceof ServiceError) || error.field === undefined) throw error;
      throw new ServiceError(
        error.name,
        `step ${JSON.stringify(this.key)} (steps[${this.index}]): ${error.message}`,
        `steps[${this.index}].${error.field}`,
      );
    }
  }
}

/** Only these fields, else a refusal naming the first other one. */
export function onlyFields(
  value: Record<string, unknown>,
  allowed: readonly string[],
  refuse: (field: string) => Error,
) {
  for (const field of Object.keys(value)) {
    if (!allowed.includes(field)) throw refuse(field);
  }
}

function unknownConfigField(place: StepPlace, type: StepType, allowed: readonly string[]) {
  return (field: string) =>
    place.refuse(
      `config.${field}`,
      allowed.length === 0
        ? `a ${type} step takes no config fields`
        : `unknown field for a ${type} step: its config takes ${allowed.join(', ')}`,
    );
}

const VARIABLE_HINT = 'or {"var": "<event payload key>"}';

/** An event name a trigger or a wait names: not empty, and not one of Resend's own. */
function checkEventName(place: StepPlace, value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw place.refuse('config.event_name', 'must name an event, e.g. "user.signed_up"');
  }
  if (value.length > MAX_EVENT_NAME) {
    throw place.refuse('config.event_name', `at most ${MAX_EVENT_NAME} characters, as an event's name`);
  }
  if (value.startsWith(RESERVED_EVENT_PREFIX)) {
    throw place.refuse('config.event_name', `names starting with "${RESERVED_EVENT_PREFIX}" are reserved`);
  }
  return value;
}

function optionalString(
  place: StepPlace,
  config: Record<string, unknown>,
  field: string,
  into: Record<string, unknown>,
) {
  const value = config[field];
  if (value === undefined) return;
  if (typeof value !== 'string') throw place.refuse(`config.${field}`, 'must be a string');
  into[field] = value;
}

/** A step's config, checked for its type; the config to store. References are checked later. */
export function checkedConfig(
  place: StepPlace,
  type: StepType,
  config: Record<string, unknown>,
): Record<string, unknown> {
  const only = (allowed: readonly string[]) => onlyFields(config, allowed, unknownConfigField(place, type, allowed));
  switch (type) {
    case 'trigger':
      only(['event_name']);
      return { event_name: checkEventName(place, config.event_name) };
    case 'send_email': {
      only(['template', 'subject', 'from', 'reply_to', 'topic_id']);
      const template = config.template;
      if (!isObject(template)) {
        throw place.refuse('config.template', 'must be an object naming a published template: {"id": "<id or alias>"}');
      }
      onlyFields(template, ['id', 'variables'], (field) =>
        place.refuse(`config.template.${field}`, 'unknown field: a template takes id and variables'),
      );
      if (typeof template.id !== 'string' || template.id.trim() === '') {
        throw place.refuse('config.template.id', "must be a template's id or alias");
      }
      const checked: Record<string, unknown> = { template: { id: template.id } };
      if (template.variables !== undefined) {
        if (!isObject(template.variables)) {
          throw place.refuse('config.template.variables', 'must be an object of variable names and values');
        }
        checked.template = { id: template.id, variables: template.variables };
      }
      for (const field of ['subject', 'from', 'reply_to', 'topic_id']) optionalString(place, config, field, checked);
      return checked;
    }
    case 'delay':
      only(['duration']);
      place.within(() => checkedDuration(config.duration, 'config.duration'));
      return { duration: config.duration };
    case 'wait_for_event': {
      only(['event_name', 'timeout', 'filter_rule']);
      const checked: Record<string, unknown> = { event_name: checkEventName(place, config.event_name) };
      if (config.timeout !== undefined) {
        place.within(() => checkedDuration(config.timeout, 'config.timeout'));
        checked.timeout = config.timeout;
      }
      if (config.filter_rule !== undefined) {
        checked.filter_rule = place.within(() => checkRule(config.filter_rule, 'config.filter_rule'));
      }
      return checked;
    }
    case 'condition':
      return place.within(() => checkRule(config, 'config'));
    case 'contact_update': {
      only(['first_name', 'last_name', 'unsubscribed', 'properties']);
      const checked: Record<string, unknown> = {};
      for (const field of ['first_name', 'last_name']) {
        const value = config[field];
        if (value === undefined) continue;
        if (!(value === null || typeof value === 'string' || isVariable(value))) {
          throw place.refuse(`config.${field}`, `must be a string, null ${VARIABLE_HINT}`);
        }
        checked[field] = value;
      }
      if (config.unsubscribed !== undefined) {
        if (!(typeof config.unsubscribed === 'boolean' || isVariable(config.unsubscribed))) {
          throw place.refuse('config.unsubscribed', `must be true, false ${VARIABLE_HINT}`);
        }
        checked.unsubscribed = config.unsubscribed;
      }
      if (config.properties !== undefined) {
        if (!isObject(config.properties)) {
          throw place.refuse('config.properties', 'must be an object of property keys and values');
        }
        for (const [key, value] of Object.entries(config.properties)) {
          const scalar = value === null || ['string', 'number', 'boolean'].includes(typeof value);
          if (!scalar && !isVariable(value)) {
            throw place.refuse(`config.properties.${key}`, `must be a string, number, boolean, null ${VARIABLE_HINT}`);
          }
        }
        checked.properties = config.properties;
      }
      return checked;
    }
    case 'contact_delete':
      only([]);
      return {};
    case 'add_to_segment':
      only(['segment_id']);
      if (typeof config.segment_id !== 'string' || config.segment_id.trim() === '') {
        throw place.refuse('config.segment_id', "must be a segment's id");
      }
      return { segment_id: config.segment_id };
  }
}
