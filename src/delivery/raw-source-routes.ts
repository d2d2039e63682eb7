import { Type } from 'typebox';
import type { Queryable } from '../platform/db/database.ts';
import type { App } from '../platform/http/app-types.ts';
import { ServiceError } from '../platform/errors.ts';
import { findOwnContent } from '../emails/email-preview.ts';
import { readCaptured } from './transports/capture.ts';

// A message's raw RFC 5322 source, as composed and DKIM-signed for delivery. Only the capture transport
// keeps it (<dataDir>/captured/<id>.eml, on the machine that delivered it); the real transports hand it
// over and keep nothing.

/** GET /emails/:id/raw: the stored source; 404 when there is none. */
export async function readRawSource(
  db: Queryable,
  dataDir: string,
  organizationId: string,
  emailId: string,
): Promise<Buffer> {
  const email = await findOwnContent(db, organizationId, emailId);
  if (email.body_pruned_at) {
    throw new ServiceError(
      'not_found',
      `The raw source of this email was deleted on ${email.body_pruned_at.toISOString()}, at the end of the retention period`,
    );
  }
  const raw = await readCaptured(dataDir, emailId);
  if (!raw) {
    throw new ServiceError(
      'not_found',
      'No raw source is stored for this email: only the capture transport (MAILROOM_TRANSPORT=capture) keeps it, once the message is sent, and retention removes it with the content',
    );
  }
  return raw;
}

export async function rawSourceRoutes(app: App) {
  app.get(
    '/emails/:id/raw',
    {
      config: { access: 'full' },
      schema: {
        summary: "An email's raw RFC 5322 source, as the capture transport stored it (text/plain)",
        params: Type.Object({ id: Type.String() }),
      },
    },
    async (request, reply) => {
      const raw = await readRawSource(app.db, app.config.dataDir, request.principal.organizationId, request.params.id);
      return reply
        .header('content-type', 'text/plain; charset=utf-8')
        .header('x-content-type-options', 'nosniff')
        .header('cache-control', 'private, no-store')
        .send(raw);
    },
  );
}
