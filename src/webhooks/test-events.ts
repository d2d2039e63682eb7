import type { EventType } from './event-types.ts';

// Sample `data` for a test event of each type in the catalog: the fields a real event of that type
// carries (Resend's required ones included, so a receiver's parser meets what a real event brings), with
// values that cannot be mistaken for real ones: every id is the nil UUID, every address at example.com.
// The event body itself carries "test": true beside id, type, created_at and data.

const NIL_ID = '00000000-0000-0000-0000-000000000000';

function emailData(createdAt: string) {
  return {
    email_id: NIL_ID,
    created_at: createdAt,
    from: 'Mailroom <test@example.com>',
    to: ['recipient@example.com'],
    subject: 'A test event from Mailroom',
    message_id: '<test@example.com>',
    tags: { category: 'test' },
    recipient: 'recipient@example.com',
  };
}

const contactData = (createdAt: string) => ({
  id: NIL_ID,
  email: 'contact@example.com',
  first_name: 'Test',
  last_name: 'Contact',
  unsubscribed: false,
  created_at: createdAt,
  updated_at: createdAt,
  segment_ids: [],
});

const domainData = (createdAt: string) => ({
  id: NIL_ID,
  name: 'example.com',
  status: 'verified',
  created_at: createdAt,
  region: 'us-east-1',
  records: [
    {
      record: 'DKIM',
      name: 'mailroom._domainkey',
      value: 'v=DKIM1; k=rsa; p=MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQC',
      type: 'TXT',
      ttl: 'Auto',
      status: 'verified',
    },
  ],
});

/** The sample `data` of a test event of `type`, stamped `createdAt` (ISO 8601). */
export function sampleEventData(type: EventType, createdAt: string): Record<string, unknown> {
  const email = emailData(createdAt);
  switch (type) {
    case 'email.accepted':
    case 'email.sent':
    case 'email.canceled':
      return email;
    case 'email.scheduled':
    case 'email.rescheduled':
      return { ...email, scheduled_at: new Date(Date.parse(createdAt) + 3600_000).toISOString() };
    case 'email.opened':
      return { ...email, user_agent: 'Mozilla/5.0 (test)' };
    case 'email.delivered':
      return { ...email, smtp_code: 250, response: '250 2.0.0 OK' };
    case 'email.delivery_delayed':
      return {
        ...email,
        smtp_code: 451,
        response: '451 4.7.1 Try again later',
        next_attempt_at: new Date(Date.parse(createdAt) + 60_000).toISOString(),
      };
    case 'email.bounced':
      return {
        ...email,
        bounce: {
          type: 'Permanent',
          subType: 'General',
          message: 'The recipient does not exist.',
          diagnosticCode: ['smtp; 550 5.1.1 user unknown'],
          smtp_code: 550,
          diagnostic: '550 5.1.1 user unknown',
        },
      };
    case 'email.complained':
      return { ...email, feedback_type: 'abuse', user_agent: 'Test feedback loop' };
    case 'email.clicked':
      return {
        ...email,
        click: {
          link: 'https://example.com/',
          ipAddress: '192.0.2.1',
          userAgent: 'Mozilla/5.0 (test)',
          timestamp: createdAt,
        },
      };
    case 'email.failed':
      return { ...email, reason: 'retries_exhausted', failed: { reason: 'retries_exhausted' } };
    case 'email.suppressed':
      return {
        ...email,
        reason: 'suppressed',
        suppressed: {
          type: 'OnAccountSuppressionList',
          reason: 'previous_bounce',
          origin: 'bounce',
          message: 'The recipient is on the suppression list.',
          diagnosticCode: [],
        },
      };
    case 'email.received':
      return {
        email_id: NIL_ID,
        created_at: createdAt,
        from: 'Sender <sender@example.com>',
        to: ['inbox@example.com'],
        cc: [],
        bcc: [],
        subject: 'A test event from Mailroom',
        message_id: '<test@example.com>',
        attachments: [],
      };
    case 'domain.created':
    case 'domain.updated':
    case 'domain.deleted':
      return domainData(createdAt);
    case 'domain.health_changed':
      return {
        id: NIL_ID,
        name: 'example.com',
        status: 'warn',
        changes: [
          {
            check: 'dmarc',
            subject: 'example.com',
            from: 'pass',
            to: 'warn',
            summary: 'No DMARC record',
            fix: 'Publish a DMARC record',
          },
        ],
      };
    case 'contact.created':
    case 'contact.updated':
    case 'contact.deleted':
      return contactData(createdAt);
    case 'contact.unsubscribed':
      return { id: NIL_ID, email: 'contact@example.com', topic_id: NIL_ID, email_id: NIL_ID, created_at: createdAt };
    case 'topic.created':
    case 'topic.updated':
    case 'topic.deleted':
      return {
        id: NIL_ID,
        name: 'Test topic',
        description: 'A topic of a test event',
        default_subscription: 'opt_in',
        deleted: type === 'topic.deleted',
        created_at: createdAt,
        updated_at: createdAt,
      };
    case 'template.created':
    case 'template.updated':
    case 'template.deleted':
      return { id: NIL_ID, name: 'Test template' };
    case 'broadcast.paused':
      return {
        id: NIL_ID,
        name: 'Test broadcast',
        status: 'paused',
        pause_reason: 'hard bounces 6.2% of 1,000 copies passed 5%',
        audience_count: 5000,
        counts: { copies: 1000, hard_bounces: 62, complaints: 0 },
        created_at: createdAt,
        updated_at: createdAt,
      };
  }
}
