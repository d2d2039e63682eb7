import type { App } from './app-types.ts';
import { ServiceError } from '../errors.ts';

/** Liveness (the process answers) and readiness (the database answers too). */
export async function healthRoutes(app: App) {
  app.get('/healthz', { config: { access: 'public' } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { config: { access: 'public' } }, async () => {
    try {
      await app.db.query('SELECT 1');
    } catch {
      throw new ServiceError('service_unavailable', 'The database is not reachable');
    }
    return { status: 'ready' };
  });
}
