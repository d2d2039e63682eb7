import type { App } from '../platform/http/app-types.ts';
import { OverviewSchema, readOverview } from './overview.ts';

/** The dashboard's home page in one request: quota, rate limit, and outcomes per hour and per day. */
export async function overviewRoutes(app: App) {
  app.get(
    '/overview',
    {
      config: { access: 'full' },
      schema: {
        summary: "The organization's quota, rate limit, and outcomes of the last 24 hours and 30 days",
        response: { 200: OverviewSchema },
      },
    },
    (request) => readOverview(app.db, request.principal.organizationId),
  );
}
