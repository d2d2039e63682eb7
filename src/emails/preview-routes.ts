import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { publicBaseUrl } from '../platform/config.ts';
import { ServiceError } from '../platform/errors.ts';
import { previewLink, previewPolicy, readPreview } from './email-preview.ts';

const IdParams = Type.Object({ id: Type.String() });

export const PreviewSchema = Type.Object({
  object: Type.Literal('email_preview'),
  html_url: Type.Union([Type.String(), Type.Null()], {
    description: 'Signed link to GET /previews/:token; null when the message has no HTML (or it was pruned)',
  }),
  expires_at: Type.String({ format: 'date-time' }),
});

/** A sandboxed preview of a message's HTML (the dashboard's message page). */
export async function previewRoutes(app: App) {
  app.get(
    '/emails/:id/preview',
    {
      config: { access: 'full' },
      schema: {
        summary: "A signed link (valid for an hour) to a sandboxed view of an email's HTML",
        params: IdParams,
        response: { 200: PreviewSchema },
      },
    },
    (request) =>
      previewLink(app.db, request.principal.organizationId, request.params.id, {
        signer: app.signer,
        baseUrl: publicBaseUrl(app.config),
        now: new Date(),
      }),
  );

  app.get(
    '/previews/:token',
    {
      // The signed html_url of GET /emails/:id/preview: the link itself is the credential, for an hour.
      config: { access: 'public' },
      schema: {
        summary: "An email's HTML, sandboxed: no script runs, nothing remote loads unless remote_content=1",
        params: Type.Object({ token: Type.String() }),
        querystring: Type.Object(
          {
            remote_content: Type.Optional(
              Type.Union([Type.Literal('0'), Type.Literal('1')], {
                description: '1 also loads remote images, styles and fonts',
              }),
            ),
          },
          { additionalProperties: false },
        ),
      },
    },
    async (request, reply) => {
      const html = await readPreview(app.db, app.signer, request.params.token, new Date());
      if (html === null) throw new ServiceError('not_found', 'This preview link is not valid or has expired');
      return reply
        .header('content-type', 'text/html; charset=utf-8')
        .header('content-security-policy', previewPolicy(request.query.remote_content === '1'))
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'private, no-store')
        .send(html);
    },
  );
}
