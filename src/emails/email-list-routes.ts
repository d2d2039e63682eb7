import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { publicBaseUrl } from '../platform/config.ts';
import { ServiceError } from '../platform/errors.ts';
import { LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, listEmails } from './list-emails.ts';
import { LAST_EVENT_FILTERS, filteredLastEvent } from './last-event.ts';
import { contentDisposition, downloadAttachment, getAttachment, listAttachments } from './attachments.ts';

const Limit = Type.Optional(
  Type.Integer({ minimum: 1, maximum: LIST_LIMIT_MAX, default: LIST_LIMIT_DEFAULT, description: '1 to 100' }),
);
const Cursor = (description: string) => Type.Optional(Type.String({ maxLength: 100, description }));

const ListQuery = Type.Object(
  {
    limit: Limit,
    after: Cursor('An email id: the page of older messages after it'),
    before: Cursor('An email id: the page of newer messages before it'),
    last_event: Type.Optional(
      Type.Union(
        LAST_EVENT_FILTERS.map((event) => Type.Literal(event)),
        { description: '`accepted` is taken as `sent`' },
      ),
    ),
    recipient: Type.Optional(Type.String({ minLength: 1, maxLength: 320, description: 'A to, cc or bcc address' })),
    from: Type.Optional(Type.String({ minLength: 1, maxLength: 320, description: "The sender's address" })),
    tag: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: '`name` or `name:value`' })),
    search: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 320,
        description:
          'Part of a to, cc or bcc address or of the subject, in any case (`alice`, `example.com`, `receipt`)',
      }),
    ),
    created_after: Type.Optional(Type.String({ format: 'date-time', description: 'Inclusive' })),
    created_before: Type.Optional(Type.String({ format: 'date-time', description: 'Exclusive' })),
  },
  { additionalProperties: false },
);

const AttachmentPage = Type.Object(
  {
    limit: Limit,
    after: Cursor('An attachment id'),
    before: Cursor('An attachment id'),
  },
  { additionalProperties: false },
);

/** The list of sent messages, and their attachments (full_access keys and sessions). */
export async function emailListRoutes(app: App) {
  const links = () => ({ signer: app.signer, baseUrl: publicBaseUrl(app.config), now: new Date() });

  app.get(
    '/emails',
    {
      config: { access: 'full' },
      schema: { summary: "The organization's emails, newest first", querystring: ListQuery },
    },
    (request) => {
      const q = request.query;
      return listEmails(app.db, request.principal.organizationId, {
        limit: q.limit ?? LIST_LIMIT_DEFAULT,
        after: q.after,
        before: q.before,
        lastEvent: q.last_event === undefined ? undefined : filteredLastEvent(q.last_event),
        recipient: q.recipient,
        from: q.from,
        tag: q.tag,
        search: q.search,
        createdAfter: q.created_after === undefined ? undefined : new Date(q.created_after),
        createdBefore: q.created_before === undefined ? undefined : new Date(q.created_before),
      });
    },
  );

  app.get(
    '/emails/:id/attachments',
    {
      config: { access: 'full' },
      schema: {
        summary: "An email's attachments",
        params: Type.Object({ id: Type.String() }),
        querystring: AttachmentPage,
      },
    },
    (request) => {
      const { limit = LIST_LIMIT_DEFAULT, after, before } = request.query;
      return listAttachments(
        app.db,
        request.principal.organizationId,
        request.params.id,
        { limit, after, before },
        links(),
      );
    },
  );

  app.get(
    '/emails/:id/attachments/:attachment_id',
    {
      config: { access: 'full' },
      schema: {
        summary: 'One attachment, with a download link',
        params: Type.Object({ id: Type.String(), attachment_id: Type.String() }),
      },
    },
    (request) =>
      getAttachment(app.db, request.principal.organizationId, request.params.id, request.params.attachment_id, links()),
  );

  app.get(
    '/attachments/:token',
    {
      // The signed download_url of an attachment: the link itself is the credential, for an hour.
      config: { access: 'public' },
      schema: { summary: "An attachment's content", params: Type.Object({ token: Type.String() }) },
    },
    async (request, reply) => {
      const file = await downloadAttachment(app.db, app.signer, request.params.token, new Date());
      if (!file) throw new ServiceError('not_found', 'This download link is not valid or has expired');
      return (
        reply
          .header('content-type', file.contentType)
          .header('content-disposition', contentDisposition(file.filename))
          .header('x-content-type-options', 'nosniff')
          // Served from the API's origin: whatever the file is (HTML, SVG), it runs nothing there.
          .header('content-security-policy', "sandbox; default-src 'none'")
          .header('cache-control', 'private, no-store')
          .send(file.content)
      );
    },
  );
}
