// The shapes the automation and event routes answer (`GET /automations…`, `GET /events`,
// `GET /received-events`), as on the wire (snake_case), for the Automations and Events pages.

export type AutomationStatus = 'enabled' | 'disabled';

export type StepType =
  | 'trigger'
  | 'send_email'
  | 'delay'
  | 'wait_for_event'
  | 'condition'
  | 'contact_update'
  | 'contact_delete'
  | 'add_to_segment';

export type ConnectionType = 'default' | 'condition_met' | 'condition_not_met' | 'timeout' | 'event_received';

export interface AutomationListItem {
  id: string;
  name: string;
  status: AutomationStatus;
  created_at: string;
  updated_at: string;
}

export interface AutomationStep {
  key: string;
  /** One of StepType; a type the dashboard does not know is shown as the API names it. */
  type: string;
  config: Record<string, unknown> | null;
}

export interface AutomationConnection {
  from: string;
  to: string;
  /** Absent means `default`, as in Resend's API. */
  type?: string;
}

export interface Automation extends AutomationListItem {
  object: 'automation';
  steps: AutomationStep[];
  connections: AutomationConnection[];
}

/** How many runs entered a step, and where they are now. */
export interface StepCount {
  key: string;
  type: string;
  entered: number;
  waiting: number;
  completed: number;
  failed: number;
  skipped: number;
}

export type RunStatus = 'running' | 'completed' | 'failed' | 'cancelled';

export interface AutomationRunListItem {
  id: string;
  status: RunStatus;
  started_at: string | null;
  completed_at: string | null;
  created_at: string;
}

export interface AutomationRunStep {
  key: string;
  type: string;
  /** pending, running, waiting, completed, failed, skipped or cancelled. */
  status: string;
  started_at: string | null;
  completed_at: string | null;
  output: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
  created_at: string;
}

export interface AutomationRun extends AutomationRunListItem {
  object: 'automation_run';
  steps: AutomationRunStep[];
  /** The run's contact, when the API names it. */
  contact_id?: string | null;
  contact_email?: string | null;
}

export type SchemaType = 'string' | 'number' | 'boolean' | 'date';

export interface EventDefinition {
  id: string;
  name: string;
  /** A flat map of payload key to type, or null for an event without a schema. */
  schema: Record<string, string> | null;
  created_at: string;
  updated_at: string | null;
}

export interface ReceivedEvent {
  object: 'received_event';
  id: string;
  event: string;
  contact_id: string | null;
  email: string | null;
  payload: unknown;
  received_at: string;
  /** When a worker started the runs it triggers and resumed those waiting for it; null until then. */
  processed_at: string | null;
}
