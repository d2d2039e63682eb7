import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { getContact } from './contacts.ts';
import {
  addToSegment,
  checkSegmentsExist,
  checkedSegmentIds,
  createSegment,
  deleteSegment,
  getSegment,
  listSegments,
  removeFromSegment,
  updateSegment,
  segmentsOfContact,
} from './segments.ts';

const IdParams = Type.Object({ id: Type.String() });
const ContactParams = Type.Object({ id_or_email: Type.String() });
const MembershipParams = Type.Object({ id_or_email: Type.String(), segment_id: Type.String() });
const Name = Type.String({ minLength: 1, maxLength: 200 });

// filter (Resend's segment field) is any JSON here and checked by segment-filter.ts, whose refusals name
// the rule at fault (filter.rules[2].value), which a schema's generic message would not. audience_id (deprecated in Resend: the audience a segment belonged to) is accepted when it names
// one of the organization's segments, and kept nowhere: an audience is itself a segment, and segments do
// not nest, so code written for Resend's transition keeps working.
const CreateSegmentBody = Type.Object(
  {
    name: Name,
    filter: Type.Optional(
      Type.Unknown({ description: 'Rules on contact fields, properties and topics (docs/audience.md)' }),
    ),
    audience_id: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    name: Type.Optional(Name),
    filter: Type.Optional(Type.Unknown({ description: 'A new filter, or null to remove it' })),
  },
  { additionalProperties: false, minProperties: 1 },
);
const CreateAudienceBody = Type.Object({ name: Name }, { additionalProperties: false });

/**
 * Resend's /segments (create, list, read, rename, delete), the same segments as its older /audiences,
 * and a contact's segments (/contacts/:id_or_email/segments).
 */
export async function segmentRoutes(app: App) {
  app.post(
    '/segments',
    { config: { access: 'full' }, schema: { summary: 'Create a segment', body: CreateSegmentBody } },
    async (request, reply) => {
      const { audience_id: audienceId } = request.body;
      if (audienceId !== undefined) {
        await checkSegmentsExist(
          app.db,
          request.principal.organizationId,
          checkedSegmentIds([audienceId], 'audience_id'),
          'audience_id',
        );
      }
      const { name, filter } = request.body;
      const { id } = await createSegment(app.db, request.principal.organizationId, name, filter);
      return reply.code(201).send({ object: 'segment', id, name });
    },
  );

  app.get(
    '/segments',
    { config: { access: 'full' }, schema: { summary: 'List segments', querystring: PageQuery } },
    async (request) => listSegments(app.db, request.principal.organizationId, request.query),
  );

  app.get(
    '/segments/:id',
    { config: { access: 'full' }, schema: { summary: 'Read a segment', params: IdParams } },
    async (request) => getSegment(app.db, request.principal.organizationId, request.params.id),
  );

  // Not in Resend's OpenAPI 1.5.0; its Node SDK has segments.update(id, { name }). filter here is
  // Mailroom's: a new one, or null to remove it.
  app.patch(
    '/segments/:id',
    {
      config: { access: 'full' },
      schema: { summary: 'Rename a segment or change its filter', params: IdParams, body: UpdateBody },
    },
    async (request) => {
      const { organizationId } = request.principal;
      const { id } = await updateSegment(app.db, organizationId, request.params.id, request.body);
      return { object: 'segment', id };
    },
  );

  app.delete(
    '/segments/:id',
    { config: { access: 'full' }, schema: { summary: 'Delete a segment (its contacts stay)', params: IdParams } },
    async (request) => {
      const { id } = await deleteSegment(app.db, request.principal.organizationId, request.params.id);
      return { object: 'segment', id, deleted: true };
    },
  );

  // Resend's older names for the same segments: an audience id is a segment id.
  app.post(
    '/audiences',
    { config: { access: 'full' }, schema: { summary: 'Create an audience (a segment)', body: CreateAudienceBody } },
    async (request, reply) => {
      const { name } = request.body;
      const { id } = await createSegment(app.db, request.principal.organizationId, name);
      return reply.code(201).send({ object: 'audience', id, name });
    },
  );

  app.get(
    '/audiences',
    { config: { access: 'full' }, schema: { summary: 'List audiences (segments)', querystring: PageQuery } },
    async (request) => {
      const listed = await listSegments(app.db, request.principal.organizationId, request.query);
      return { ...listed, data: listed.data.map((segment) => ({ ...segment, object: 'audience' })) };
    },
  );

  app.get(
    '/audiences/:id',
    { config: { access: 'full' }, schema: { summary: 'Read an audience (a segment)', params: IdParams } },
    async (request) => ({
      ...(await getSegment(app.db, request.principal.organizationId, request.params.id)),
      object: 'audience',
    }),
  );

  app.delete(
    '/audiences/:id',
    { config: { access: 'full' }, schema: { summary: 'Delete an audience (a segment)', params: IdParams } },
    async (request) => {
      const { id } = await deleteSegment(app.db, request.principal.organizationId, request.params.id);
      return { object: 'audience', id, deleted: true };
    },
  );

  app.get(
    '/contacts/:id_or_email/segments',
    {
      config: { access: 'full' },
      schema: { summary: 'The segments a contact is in', params: ContactParams, querystring: PageQuery },
    },
    async (request) => {
      const { organizationId } = request.principal;
      const contact = await getContact(app.db, organizationId, request.params.id_or_email);
      return segmentsOfContact(app.db, organizationId, contact.id, request.query);
    },
  );

  app.post(
    '/contacts/:id_or_email/segments/:segment_id',
    { config: { access: 'full' }, schema: { summary: 'Add a contact to a segment', params: MembershipParams } },
    async (request) => {
      const { organizationId } = request.principal;
      const contact = await getContact(app.db, organizationId, request.params.id_or_email);
      const { segmentId } = await addToSegment(app.db, organizationId, contact.id, request.params.segment_id);
      // `id` (the segment's) is where Resend's SDK reads the answer; the document has contact_id and segment_id.
      return { object: 'contact_segment', id: segmentId, contact_id: contact.id, segment_id: segmentId };
    },
  );

  app.delete(
    '/contacts/:id_or_email/segments/:segment_id',
    { config: { access: 'full' }, schema: { summary: 'Remove a contact from a segment', params: MembershipParams } },
    async (request) => {
      const { organizationId } = request.principal;
      const contact = await getContact(app.db, organizationId, request.params.id_or_email);
      const { segmentId } = await removeFromSegment(app.db, organizationId, contact.id, request.params.segment_id);
      return {
        object: 'contact_segment',
        // The SDK's RemoveContactSegmentResponseSuccess reads `id` and `audienceId`; the document the others.
        id: segmentId,
        audienceId: segmentId,
        contact_id: contact.id,
        segment_id: segmentId,
        deleted: true,
      };
    },
  );
}
