import type { App } from '../platform/http/app-types.ts';
import { MetricsQuerySchema, metricsRequest } from './metrics-request.ts';
import { MetricsSchema, readEmailMetrics } from './metrics.ts';

/**
 * Resend's email metrics: counts and rates of the organization's mail over a date range, in total and
 * per period, sending domain or message. A static path, so `/emails/metrics` is never read as `/emails/:id`.
 */
export async function metricsRoutes(app: App) {
  app.get(
    '/emails/metrics',
    {
      config: { access: 'full' },
      schema: {
        summary: "Counts and rates of the organization's email over a date range (Resend's metrics)",
        querystring: MetricsQuerySchema,
        response: { 200: MetricsSchema },
      },
    },
    (request) => readEmailMetrics(app.db, request.principal.organizationId, metricsRequest(request.query, new Date())),
  );
}
