// The catalog of event types, the only ones an endpoint can name. An endpoint subscribes to some of them,
// or to all (events: []), which includes types added to this list later.

export const EVENT_TYPES = [
  'email.accepted',
  'email.scheduled',
  'email.rescheduled',
  'email.sent',
  'email.canceled',
  'email.delivered',
  'email.delivery_delayed',
  'email.bounced',
  'email.complained',
  'email.opened',
  'email.clicked',
  'email.failed',
  'email.suppressed',
  'email.received',
  'domain.created',
  'domain.updated',
  'domain.deleted',
  'domain.health_changed',
  'contact.created',
  'contact.updated',
  'contact.deleted',
  'contact.unsubscribed',
  'topic.created',
  'topic.updated',
  'topic.deleted',
  'template.created',
  'template.updated',
  'template.deleted',
  'broadcast.paused',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export function isEventType(value: string): value is EventType {
  return (EVENT_TYPES as readonly string[]).includes(value);
}
