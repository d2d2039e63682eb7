// The shapes of an automation's graph, as Resend's API gives them (snake_case, as on the wire): steps
// with a key, a type and a config, and typed connections between step keys. A run walks the graph from
// its trigger; automation-graph.ts checks a graph before it is saved or enabled.

export const STEP_TYPES = [
  'trigger',
  'send_email',
  'delay',
  'wait_for_event',
  'condition',
  'contact_update',
  'contact_delete',
  'add_to_segment',
] as const;
export type StepType = (typeof STEP_TYPES)[number];

export const CONNECTION_TYPES = ['default', 'condition_met', 'condition_not_met', 'timeout', 'event_received'] as const;
export type ConnectionType = (typeof CONNECTION_TYPES)[number];

/** At most this many steps in one automation (Resend's limit). */
export const MAX_STEPS = 150;

export interface AutomationStep {
  key: string;
  type: StepType;
  config: Record<string, unknown>;
}

export interface AutomationConnection {
  from: string;
  to: string;
  type: ConnectionType;
}

export interface AutomationGraph {
  steps: AutomationStep[];
  connections: AutomationConnection[];
}

export type RunStatus = 'running' | 'completed' | 'failed' | 'cancelled';

/**
 * A run step's status: Resend's six, and `cancelled` for a step not yet done when its run was cancelled
 * (stopped, or its contact deleted).
 */
export type RunStepStatus = 'pending' | 'running' | 'waiting' | 'completed' | 'failed' | 'skipped' | 'cancelled';

/** Event names starting with this are Resend's own, refused from applications. */
export const RESERVED_EVENT_PREFIX = 'resend:';

/** The queue of the events sent: one job per event. */
export const EVENT_QUEUE = 'automation-event';
