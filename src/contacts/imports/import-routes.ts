import { Type } from 'typebox';
import multipart from '@fastify/multipart';
import type { App } from '../../platform/http/app-types.ts';
import { PageQuery } from '../../platform/db/keyset-page.ts';
import { ServiceError } from '../../platform/errors.ts';
import { FIELD_NAMES, type ImportFields } from './import-options.ts';
import {
  MAX_FILE_BYTES,
  abandonUpload,
  beginUpload,
  getContactImport,
  listContactImports,
  listImportErrors,
  queueUpload,
  storeFile,
} from './contact-imports.ts';

// Resend's /contacts/imports: upload a CSV file (multipart/form-data), list imports, read one; and
// Mailroom's own GET /contacts/imports/:id/errors, the rows that were not imported and why. The
// multipart parser is registered in this plugin only, so no other route takes multipart bodies.

const IdParams = Type.Object({ id: Type.String() });
const Status = Type.Union([
  Type.Literal('queued'),
  Type.Literal('in_progress'),
  Type.Literal('completed'),
  Type.Literal('failed'),
]);
const ListQuery = Type.Object(
  { ...PageQuery.properties, status: Type.Optional(Status) },
  { additionalProperties: false },
);
const ErrorsQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    after: Type.Optional(Type.Integer({ minimum: 0, description: 'A row number: the errors of later rows' })),
  },
  { additionalProperties: false },
);

/** The longest JSON form field (column_map, segments, topics). */
const FIELD_MAX_BYTES = 64 * 1024;

export async function contactImportRoutes(app: App) {
  await app.register(multipart, {
    limits: { fileSize: MAX_FILE_BYTES, files: 1, fields: 10, fieldSize: FIELD_MAX_BYTES, parts: 12 },
    throwFileSizeLimit: true,
  });

  app.post(
    '/contacts/imports',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Import contacts from a CSV file',
        description:
          'multipart/form-data: `file` (CSV, at most 50 MB), `column_map`, `segments` and `topics` (JSON text), ' +
          '`on_conflict` (upsert or skip). Answers 201 once the file is stored; the import runs in the background.',
        consumes: ['multipart/form-data'],
      },
    },
    async (request, reply) => {
      if (!request.isMultipart()) {
        throw new ServiceError('validation_error', 'Send the file as multipart/form-data with a "file" part', 'file');
      }
      const { organizationId } = request.principal;
      const importId = await beginUpload(app.db, organizationId);
      let answered = false;
      try {
        const fields: ImportFields = {};
        let file: { bytes: number; sha256: string } | undefined;
        for await (const part of request.parts()) {
          if (part.type === 'file') {
            if (part.fieldname !== 'file' || file) {
              part.file.resume();
              throw new ServiceError(
                'validation_error',
                `${part.fieldname}: only one file, named "file"`,
                part.fieldname,
              );
            }
            file = await storeFile(app.db, importId, part.file);
            continue;
          }
          const name = part.fieldname as keyof ImportFields;
          if (!FIELD_NAMES.includes(name)) {
            throw new ServiceError('validation_error', `${part.fieldname}: not a field of an import`, part.fieldname);
          }
          if (part.valueTruncated) {
            throw new ServiceError('validation_error', `${name}: at most ${FIELD_MAX_BYTES} bytes`, name);
          }
          fields[name] = String(part.value);
        }
        if (!file) throw new ServiceError('missing_required_field', 'file: the CSV file is required', 'file');
        const header = request.headers['idempotency-key'];
        const result = await queueUpload(app.db, organizationId, {
          importId,
          ...file,
          fields,
          idempotencyKey: Array.isArray(header) ? header.join(',') : header,
          path: request.url.split('?')[0]!,
        });
        answered = true;
        return reply.code(201).send(result);
      } catch (error) {
        throw uploadError(error);
      } finally {
        if (!answered) await abandonUpload(app.db, importId).catch(() => {});
      }
    },
  );

  app.get(
    '/contacts/imports',
    { config: { access: 'full' }, schema: { summary: 'List contact imports', querystring: ListQuery } },
    async (request) => listContactImports(app.db, request.principal.organizationId, request.query),
  );

  app.get(
    '/contacts/imports/:id',
    { config: { access: 'full' }, schema: { summary: 'Read a contact import', params: IdParams } },
    async (request) => getContactImport(app.db, request.principal.organizationId, request.params.id),
  );

  app.get(
    '/contacts/imports/:id/errors',
    {
      config: { access: 'full' },
      schema: {
        summary: 'The rows of a contact import that were not imported',
        params: IdParams,
        querystring: ErrorsQuery,
      },
    },
    async (request) => {
      const { limit = 100, after } = request.query;
      return listImportErrors(app.db, request.principal.organizationId, request.params.id, { limit, after });
    },
  );
}

/** The multipart reader's refusals as the envelope's: a file over the limit is a 413, a broken body a 400. */
function uploadError(error: unknown): unknown {
  if (error instanceof ServiceError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'FST_REQ_FILE_TOO_LARGE') {
    return new ServiceError('payload_too_large', `file: at most ${MAX_FILE_BYTES / 1024 / 1024} MB`, 'file');
  }
  // Busboy's own (a form cut short, a malformed part header) carry no code, only their message.
  const message = error instanceof Error ? error.message : '';
  if (
    (typeof code === 'string' && code.startsWith('FST_')) ||
    /end of form|malformed|multipart|boundary/i.test(message)
  ) {
    return new ServiceError('validation_error', `The multipart body could not be read: ${message}`);
  }
  return error;
}
