import { timingSafeEqual } from 'node:crypto';
import type { App } from './app-types.ts';
import { ServiceError } from '../errors.ts';
import { registry } from '../metrics.ts';

/** A readiness check beyond the database's: undefined when fine, else why the process is not ready. */
export type ReadinessCheck = () => Promise<string | undefined>;

/**
 * Liveness (`/healthz`: the process answers), readiness (`/readyz`: the database answers, and every
 * check the process's role adds, e.g. its queues are not behind), and the Prometheus metrics.
 */
export function healthRoutes(checks: ReadinessCheck[]) {
  return async (app: App) => {
    app.get('/healthz', { config: { access: 'public' } }, async () => ({ status: 'ok' }));

    app.get('/readyz', { config: { access: 'public' } }, async () => {
      try {
        await app.db.query('SELECT 1');
      } catch {
        throw new ServiceError('service_unavailable', 'The database is not reachable');
      }
      for (const check of checks) {
        const problem = await check();
        if (problem) throw new ServiceError('service_unavailable', problem);
      }
      return { status: 'ready' };
    });

    app.get(
      '/metrics',
      // The metrics token, when set, is the credential: no API key is asked for.
      { config: { access: 'public' }, schema: { summary: 'Prometheus metrics of this process (text format)' } },
      async (request, reply) => {
        const token = app.config.metricsToken;
        if (token !== undefined && !sameToken(request.headers.authorization, `Bearer ${token}`)) {
          throw new ServiceError(
            'invalid_api_key',
            'GET /metrics needs Authorization: Bearer <MAILROOM_METRICS_TOKEN>',
          );
        }
        return reply.type(registry.contentType).send(await registry.metrics());
      },
    );
  };
}

function sameToken(given: string | undefined, expected: string): boolean {
  const a = Buffer.from(given ?? '');
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
