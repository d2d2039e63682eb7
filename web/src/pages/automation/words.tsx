import { useId } from 'react';
import { StatusBadge } from '../../components/index.ts';
import type { AutomationStatus } from './types.ts';
import './automation.css';

// Automations in words: status badges, the switch that turns an automation on and off, what each step
// type and connection type is called, and a one-line summary of a step's config.

export const STEP_WORDS: Record<string, string> = {
  trigger: 'Trigger',
  send_email: 'Send email',
  delay: 'Delay',
  wait_for_event: 'Wait for event',
  condition: 'Condition',
  contact_update: 'Update contact',
  contact_delete: 'Delete contact',
  add_to_segment: 'Add to segment',
};

/** A step type in words; a type the dashboard does not know reads as the API names it. */
export const stepWords = (type: string) => STEP_WORDS[type] ?? type;

/** The label on a connection; `default` (or none) has no label. */
export const CONNECTION_WORDS: Record<string, string> = {
  condition_met: 'condition met',
  condition_not_met: 'condition not met',
  timeout: 'timeout',
  event_received: 'event received',
};

export function connectionWords(type: string | undefined): string | undefined {
  if (type === undefined || type === 'default') return undefined;
  return CONNECTION_WORDS[type] ?? type;
}

/** An automation's status: enabled reads green, disabled neutral. */
export function AutomationStatusBadge({ status }: { status: string }) {
  if (status === 'enabled') return <StatusBadge tone="enabled">Enabled</StatusBadge>;
  if (status === 'disabled') return <StatusBadge tone="disabled">Disabled</StatusBadge>;
  return <StatusBadge tone="other">{status}</StatusBadge>;
}

// The tones of run and run-step statuses, from those every page shares (styles.css, .status-<tone>):
// done is green, under way or waiting amber, failed red, cancelled and skipped neutral.
const RUN_TONES: Record<string, string> = {
  running: 'pending',
  pending: 'pending',
  waiting: 'scheduled',
  completed: 'delivered',
  failed: 'failed',
  cancelled: 'cancelled',
  skipped: 'skipped',
};

const RUN_WORDS: Record<string, string> = {
  running: 'Running',
  pending: 'Pending',
  waiting: 'Waiting',
  completed: 'Completed',
  failed: 'Failed',
  cancelled: 'Cancelled',
  skipped: 'Skipped',
};

/** A run's or a run step's status as a badge. */
export function RunStatusBadge({ status }: { status: string }) {
  return <StatusBadge tone={RUN_TONES[status] ?? 'other'}>{RUN_WORDS[status] ?? status}</StatusBadge>;
}

/**
 * The on/off switch of one automation: a button with role="switch" (its state in aria-checked), named
 * after the automation so that a list of them reads "Enabled: Welcome series".
 */
export function AutomationSwitch({
  name,
  status,
  busy,
  onChange,
  showLabel = false,
}: {
  name: string;
  status: AutomationStatus;
  busy: boolean;
  onChange: (status: AutomationStatus) => void;
  /** Shows "Enabled" as a visible label next to the switch (on the automation's page). */
  showLabel?: boolean;
}) {
  const id = useId();
  const on = status === 'enabled';
  return (
    <span className="automation-switch">
      <button
        id={id}
        type="button"
        role="switch"
        className="switch"
        aria-checked={on}
        aria-label={showLabel ? undefined : `Enabled: ${name}`}
        disabled={busy}
        onClick={() => onChange(on ? 'disabled' : 'enabled')}
      >
        <span className="switch-knob" aria-hidden="true" />
      </button>
      {showLabel ? <label htmlFor={id}>Enabled: new events start runs</label> : null}
    </span>
  );
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const text = (value: unknown): string =>
  typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value);

const OPERATOR_WORDS: Record<string, string> = {
  eq: '=',
  neq: '≠',
  gt: '>',
  gte: '≥',
  lt: '<',
  lte: '≤',
  contains: 'contains',
  starts_with: 'starts with',
  ends_with: 'ends with',
  exists: 'exists',
  is_empty: 'is empty',
};

/** A condition's rule tree in one line: `plan = "pro" and (age > 30 or vip exists)`. */
export function ruleWords(rule: unknown, nested = false): string {
  if (!isObject(rule)) return '';
  if ((rule.type === 'and' || rule.type === 'or') && Array.isArray(rule.rules)) {
    const joined = rule.rules.map((inner) => ruleWords(inner, true)).join(` ${rule.type} `);
    return nested ? `(${joined})` : joined;
  }
  if (rule.type === 'not')
    return `not ${ruleWords(rule.rule ?? (Array.isArray(rule.rules) ? rule.rules[0] : undefined), true)}`;
  const operator = OPERATOR_WORDS[text(rule.operator)] ?? text(rule.operator);
  const field = text(rule.field);
  if (rule.operator === 'exists' || rule.operator === 'is_empty') return `${field} ${operator}`;
  return `${field} ${operator} ${JSON.stringify(rule.value ?? null)}`;
}

/** Names the dashboard knows for ids in configs: templates and segments. */
export interface KnownNames {
  templates: Map<string, string>;
  segments: Map<string, string>;
}

/** What a step does, in one line, from its config. */
export function stepSummary(type: string, config: Record<string, unknown> | null, names: KnownNames): string {
  const c = config ?? {};
  switch (type) {
    case 'trigger':
      return c.event_name ? `On “${text(c.event_name)}”` : 'On an event';
    case 'send_email': {
      const template = isObject(c.template) ? text(c.template.id) : text(c.template_id);
      const name = names.templates.get(template) ?? template;
      const subject = c.subject ? ` · ${text(c.subject)}` : '';
      return name ? `Template “${name}”${subject}` : subject.slice(3) || 'An email';
    }
    case 'delay':
      return c.duration ? `Wait ${text(c.duration)}` : 'Wait';
    case 'wait_for_event': {
      const timeout = c.timeout ? `, at most ${text(c.timeout)}` : '';
      return `Until “${text(c.event_name)}”${timeout}`;
    }
    case 'condition': {
      const rule = isObject(c.rule) ? c.rule : c;
      return ruleWords(rule) || 'A condition';
    }
    case 'contact_update': {
      const fields = [
        ...Object.keys(c).filter((key) => key !== 'properties'),
        ...(isObject(c.properties) ? Object.keys(c.properties) : []),
      ];
      return fields.length > 0 ? `Sets ${fields.join(', ')}` : 'Updates the contact';
    }
    case 'contact_delete':
      return 'Deletes the contact';
    case 'add_to_segment': {
      const segment = text(c.segment_id);
      return `To “${names.segments.get(segment) ?? segment}”`;
    }
    default:
      return '';
  }
}
