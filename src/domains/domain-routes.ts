import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { addDomain, deleteDomain, getDomain, listDomains, updateDomain, verifyDomain } from './domains.ts';
import { dmarcSummary } from './dmarc.ts';
import { dmarcAddress } from './dmarc-address.ts';
import { loadShapingFile } from '../shaping/shaping-file.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { DomainSettingsBody, NewDomainBody } from './domain-options.ts';

const IdParams = Type.Object({ id: Type.String() });

const DmarcQuery = Type.Object(
  { days: Type.Optional(Type.Integer({ minimum: 1, maximum: 366, default: 30 })) },
  { additionalProperties: false },
);

/** Resend's /domains: add (with the DNS records to publish), list, read, update (tracking), delete, verify now. */
export async function domainRoutes(app: App) {
  app.post(
    '/domains',
    {
      config: { access: 'full' },
      schema: { body: NewDomainBody },
    },
    async (request, reply) => {
      const { name, ...options } = request.body;
      const domain = await addDomain(app.db, app.config, request.principal.organizationId, name, options);
      return reply.code(201).send(domain);
    },
  );

  app.get('/domains', { config: { access: 'full' }, schema: { querystring: PageQuery } }, async (request) =>
    listDomains(app.db, app.config, request.principal.organizationId, request.query),
  );

  app.get('/domains/:id', { config: { access: 'full' }, schema: { params: IdParams } }, async (request) => {
    return getDomain(app.db, app.config, request.principal.organizationId, request.params.id);
  });

  app.patch(
    '/domains/:id',
    {
      config: { access: 'full' },
      schema: {
        summary: "Switch the domain's open or click tracking (null follows the organization)",
        params: IdParams,
        body: DomainSettingsBody,
      },
    },
    async (request) => {
      const domain = await updateDomain(
        app.db,
        app.config,
        request.principal.organizationId,
        request.params.id,
        request.body,
      );
      return { object: 'domain', id: domain.id };
    },
  );

  app.delete('/domains/:id', { config: { access: 'full' }, schema: { params: IdParams } }, async (request) => {
    await deleteDomain(app.db, request.principal.organizationId, request.params.id);
    return { object: 'domain', id: request.params.id, deleted: true };
  });

  // The egress source addresses, so that a report's source address can be told as Mailroom's own.
  const mailroomSources = new Map<string, string>();
  for (const source of loadShapingFile(app.config.shapingFile).egress.sources.values()) {
    if (source.kind === 'address' && source.address !== undefined) mailroomSources.set(source.address, source.name);
  }
  app.get(
    '/domains/:id/dmarc',
    {
      config: { access: 'full' },
      schema: {
        summary: "The domain's DMARC aggregate reports: pass rate, per day and per source",
        params: IdParams,
        querystring: DmarcQuery,
      },
    },
    async (request) =>
      dmarcSummary(app.db, request.principal.organizationId, request.params.id, {
        days: request.query.days ?? 30,
        now: new Date(),
        mailroomSources,
        rua: app.config.returnPathDomain === undefined ? null : `mailto:${dmarcAddress(app.config.returnPathDomain)}`,
      }),
  );

  // Synchronous: the caller gets the outcome of this check, bounded by MAILROOM_DNS_TIMEOUT_MS.
  app.post('/domains/:id/verify', { config: { access: 'full' }, schema: { params: IdParams } }, async (request) => {
    return verifyDomain(app.db, app.config, request.principal.organizationId, request.params.id);
  });
}
