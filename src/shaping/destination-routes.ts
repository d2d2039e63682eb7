import type { App } from '../platform/http/app-types.ts';
import { loadShapingFile } from './shaping-file.ts';
import { listDestinations } from './destinations.ts';

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
}
