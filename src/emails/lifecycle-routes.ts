import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { ServiceError } from '../platform/errors.ts';
import { cancelEmail, rescheduleEmail } from './lifecycle.ts';
import { readEmail, readTimeline } from './read-email.ts';
import { SCHEDULED_AT_DESCRIPTION, parseScheduledAt } from './scheduled-at.ts';

const IdParams = Type.Object({ id: Type.String() });

/** Reading a message and its timeline, cancelling and rescheduling: full_access keys and sessions only. */
export async function lifecycleRoutes(app: App) {
  app.get(
    '/emails/:id',
    { config: { access: 'full' }, schema: { summary: 'Read an email', params: IdParams } },
    (request) => readEmail(app.db, request.principal.organizationId, request.params.id),
  );

  app.get(
    '/emails/:id/events',
    { config: { access: 'full' }, schema: { summary: "An email's timeline, oldest first", params: IdParams } },
    (request) => readTimeline(app.db, request.principal.organizationId, request.params.id),
  );

  app.post(
    '/emails/:id/cancel',
    { config: { access: 'full' }, schema: { summary: 'Cancel an email not yet sent', params: IdParams } },
    async (request) => {
      await cancelEmail(app.db, request.principal.organizationId, request.params.id);
      return { object: 'email', id: request.params.id };
    },
  );

  app.patch(
    '/emails/:id',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Reschedule an email not yet sent',
        params: IdParams,
        body: Type.Object(
          { scheduled_at: Type.String({ description: SCHEDULED_AT_DESCRIPTION }) },
          { additionalProperties: false },
        ),
      },
    },
    async (request) => {
      const at = parseScheduledAt(request.body.scheduled_at, new Date(), app.config.maxScheduleDays);
      if (!at) throw new ServiceError('missing_required_field', 'Missing required field: scheduled_at', 'scheduled_at');
      await rescheduleEmail(app.db, request.principal.organizationId, request.params.id, at);
      return { object: 'email', id: request.params.id };
    },
  );
}
