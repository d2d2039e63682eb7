import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { publicBaseUrl } from '../platform/config.ts';
import { ServiceError } from '../platform/errors.ts';
import { contentDisposition } from '../emails/attachments.ts';
import { PreviewSchema } from '../emails/preview-routes.ts';
import {
  RECEIVED_FILE_PATH,
  RECEIVED_LIMIT_DEFAULT,
  RECEIVED_LIMIT_MAX,
  downloadReceivedFile,
  getReceivedAttachment,
  getReceivedEmail,
  listReceivedAttachments,
  listReceivedEmails,
  receivedPreviewLink,
} from './received-emails.ts';

const Limit = Type.Optional(
  Type.Integer({
    minimum: 1,
    maximum: RECEIVED_LIMIT_MAX,
    default: RECEIVED_LIMIT_DEFAULT,
    description: '1 to 100',
  }),
);
const Cursor = (description: string) => Type.Optional(Type.String({ maxLength: 100, description }));

const ListQuery = Type.Object(
  {
    limit: Limit,
    after: Cursor('A received email id: the page of older messages after it'),
    before: Cursor('A received email id: the page of newer messages before it'),
    quarantined: Type.Optional(
      Type.Boolean({ description: 'Mailroom: true lists only the quarantined messages, which are otherwise left out' }),
    ),
    search: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 320,
        description: 'Mailroom: part of the sender, a recipient or the subject, in any case',
      }),
    ),
  },
  { additionalProperties: false },
);

const GetQuery = Type.Object(
  {
    html_format: Type.Optional(
      Type.Union([Type.Literal('data_uri'), Type.Literal('cid')], {
        description: "data_uri (default): inline images as data: URIs; cid: the message's own cid: references",
      }),
    ),
  },
  { additionalProperties: false },
);

const AttachmentPage = Type.Object(
  { limit: Limit, after: Cursor('An attachment id'), before: Cursor('An attachment id') },
  { additionalProperties: false },
);

const IdParams = Type.Object({ id: Type.String() });

/** Resend's emails.receiving: received messages and their attachments (full_access keys and sessions, as GET /emails). */
export async function receivedEmailRoutes(app: App) {
  const links = () => ({ signer: app.signer, baseUrl: publicBaseUrl(app.config), now: new Date() });

  app.get(
    '/emails/receiving',
    {
      config: { access: 'full' },
      schema: { summary: "The organization's received emails, newest first", querystring: ListQuery },
    },
    (request) => {
      const q = request.query;
      return listReceivedEmails(app.db, request.principal.organizationId, {
        limit: q.limit ?? RECEIVED_LIMIT_DEFAULT,
        after: q.after,
        before: q.before,
        quarantined: q.quarantined ?? false,
        search: q.search,
      });
    },
  );

  app.get(
    '/emails/receiving/:id',
    {
      config: { access: 'full' },
      schema: {
        summary: 'One received email, with a download link to its raw source',
        params: IdParams,
        querystring: GetQuery,
      },
    },
    (request) =>
      getReceivedEmail(
        app.db,
        request.principal.organizationId,
        request.params.id,
        { htmlFormat: request.query.html_format ?? 'data_uri' },
        links(),
      ),
  );

  app.get(
    '/emails/receiving/:id/preview',
    {
      config: { access: 'full' },
      schema: {
        summary: "Mailroom: a signed link (valid for an hour) to a sandboxed view of a received email's HTML",
        params: IdParams,
        response: { 200: PreviewSchema },
      },
    },
    (request) => receivedPreviewLink(app.db, request.principal.organizationId, request.params.id, links()),
  );

  app.get(
    '/emails/receiving/:id/attachments',
    {
      config: { access: 'full' },
      schema: { summary: "A received email's attachments", params: IdParams, querystring: AttachmentPage },
    },
    (request) => {
      const { limit = RECEIVED_LIMIT_DEFAULT, after, before } = request.query;
      return listReceivedAttachments(
        app.db,
        request.principal.organizationId,
        request.params.id,
        { limit, after, before },
        links(),
      );
    },
  );

  app.get(
    '/emails/receiving/:id/attachments/:attachment_id',
    {
      config: { access: 'full' },
      schema: {
        summary: 'One attachment of a received email, with a download link',
        params: Type.Object({ id: Type.String(), attachment_id: Type.String() }),
      },
    },
    (request) =>
      getReceivedAttachment(
        app.db,
        request.principal.organizationId,
        request.params.id,
        request.params.attachment_id,
        links(),
      ),
  );

  app.get(
    `${RECEIVED_FILE_PATH}/:token`,
    {
      // A signed raw.download_url or attachment download_url: the link itself is the credential, for an hour.
      config: { access: 'public' },
      schema: {
        summary: "A received email's raw source or one of its attachments",
        params: Type.Object({ token: Type.String() }),
      },
    },
    async (request, reply) => {
      const file = await downloadReceivedFile(app.db, app.signer, request.params.token, new Date());
      if (!file) throw new ServiceError('not_found', 'This download link is not valid or has expired');
      return (
        reply
          .header('content-type', file.contentType)
          .header('content-disposition', contentDisposition(file.filename))
          .header('x-content-type-options', 'nosniff')
          // Served from the API's origin: whatever a stranger sent (HTML, SVG), it runs nothing there.
          .header('content-security-policy', "sandbox; default-src 'none'")
          .header('cache-control', 'private, no-store')
          .send(file.content)
      );
    },
  );
}
