import type { App } from '../platform/http/app-types.ts';
import { loadShapingFile } from './shaping-file.ts';
import { listDestinations } from './destinations.ts';
import { listPools, listSources } from './sources.ts';

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

  // The install's egress sources (never a relay's credentials) with each warming source's stage, today's
  // allowance and sends per site; and the pools, marking the ones the caller's mail goes through.
  app.get(
    '/sources',
    { config: { access: 'full' }, schema: { summary: 'Egress sources: addresses, relays, warm-up per site' } },
    async () => ({ object: 'list', data: await listSources(app.db, policy.egress, new Date()) }),
  );
  app.get(
    '/pools',
    { config: { access: 'full' }, schema: { summary: 'Egress pools: their sources, overflow and site routes' } },
    async (request) => {
      const organizationId = request.principal.organizationId;
      const { rows } = await app.db.query<{ name: string }>(
        "SELECT name FROM domains WHERE organization_id = $1 AND status = 'verified'",
        [organizationId],
      );
      const domains = rows.map((row) => row.name);
      return { object: 'list', data: listPools(policy.egress, { id: organizationId, domains }) };
    },
  );
}
