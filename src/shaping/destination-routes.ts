import type { App } from '../platform/http/app-types.ts';
import { loadShapingFile } from './shaping-file.ts';
import { listDestinations } from './destinations.ts';
import { listPools, listSources, sourcesOf } from './sources.ts';

/**
 * GET /destinations: the destination sites the install delivers to, their limits in force, connections
 * and holds (shared by every organization: they are the install's, like its IP addresses), and how many
 * of the caller's own messages wait for each.
 */
export async function destinationRoutes(app: App) {
  const policy = loadShapingFile(app.config.shapingFile);
  app.get(
    '/destinations',
    { config: { access: 'full' }, schema: { summary: 'Destination sites: limits in force, connections, holds' } },
    async (request) => ({
      object: 'list',
      data: await listDestinations(app.db, policy, new Date(), request.principal.organizationId),
    }),
  );

  // The egress sources and pools the caller's mail may go through (never a relay's credentials, never
  // another organization's dedicated pool), with each warming source's stage, allowance and day per site.
  const organizationOf = async (organizationId: string) => {
    const { rows } = await app.db.query<{ name: string }>(
      "SELECT name FROM domains WHERE organization_id = $1 AND status = 'verified'",
      [organizationId],
    );
    return { id: organizationId, domains: rows.map((row) => row.name) };
  };
  app.get(
    '/sources',
    { config: { access: 'full' }, schema: { summary: 'Egress sources your mail may use: addresses, relays, warm-up' } },
    async (request) => {
      const organization = await organizationOf(request.principal.organizationId);
      const reachable = listPools(policy.egress, organization).map((pool) => pool.name);
      const only = sourcesOf(policy.egress, reachable);
      return { object: 'list', data: await listSources(app.db, policy.egress, new Date(), only) };
    },
  );
  app.get(
    '/pools',
    {
      config: { access: 'full' },
      schema: { summary: 'Egress pools your mail may use: sources, overflow, site routes' },
    },
    async (request) => ({
      object: 'list',
      data: listPools(policy.egress, await organizationOf(request.principal.organizationId)),
    }),
  );
}
