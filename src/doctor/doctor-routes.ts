import { Resolver } from 'node:dns/promises';
import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import { loadShapingFile } from '../shaping/shaping-file.ts';
import { checkDomain, domainHealth, type DoctorContext } from './doctor.ts';

const IdParams = Type.Object({ id: Type.String() });

/** The doctor's context from the settings: their DNS servers, the shaping file's sources. */
export function doctorContext(db: Database, config: Config): DoctorContext {
  const resolver = new Resolver({ timeout: config.dnsTimeoutMs, tries: 1 });
  if (config.dnsServers.length > 0) resolver.setServers(config.dnsServers);
  return { db, config, egress: loadShapingFile(config.shapingFile).egress, resolver };
}

/** POST /domains/:id/check runs the deliverability doctor now; GET /domains/:id/health reads its last findings. */
export async function doctorRoutes(app: App) {
  const context = doctorContext(app.db, app.config);
  app.post(
    '/domains/:id/check',
    {
      config: { access: 'full' },
      schema: { summary: 'Run the deliverability doctor on the domain and its sources now', params: IdParams },
    },
    async (request) => checkDomain(context, request.principal.organizationId, request.params.id),
  );
  app.get(
    '/domains/:id/health',
    { config: { access: 'full' }, schema: { summary: "The doctor's last findings for the domain", params: IdParams } },
    async (request) =>
      (await domainHealth(app.db, request.principal.organizationId, request.params.id)) ?? {
        object: 'domain_health',
        domain_id: request.params.id,
        status: null,
        checked_at: null,
        findings: [],
      },
  );
}
