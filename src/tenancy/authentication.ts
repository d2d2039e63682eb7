import type { App } from '../platform/http/app-types.ts';
import { checkAccess, resolveBearer } from './credentials.ts';
import { keyUsageOf } from './key-usage.ts';

/**
 * Every route that is not `public` resolves its bearer token to a principal before anything else runs,
 * and refuses a credential its access does not admit (401 in the envelope).
 */
export function installAuthentication(app: App): void {
  app.decorateRequest('principal', null as never);
  app.addHook('onRequest', async (request) => {
    const access = request.routeOptions.config.access;
    if (!access || access === 'public') return;
    const principal = await resolveBearer(app.db, request.headers.authorization);
    // A key's use is its last_used_at, whether or not this route admits it (at most a write a minute).
    if (principal.kind === 'api_key') await keyUsageOf(app.db).record(principal.apiKeyId);
    // Known before the access check, so that a refused call is still its organization's (request log).
    request.principal = principal;
    checkAccess(principal, access);
  });
}
