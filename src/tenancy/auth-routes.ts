import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { endSession, login } from './sessions.ts';

/** Dashboard sessions: email and password in, a bearer session token out. */
export async function authRoutes(app: App) {
  app.post(
    '/auth/login',
    {
      config: { access: 'public' },
      schema: {
        body: Type.Object(
          {
            email: Type.String({ minLength: 1, maxLength: 320 }),
            password: Type.String({ minLength: 1, maxLength: 1024 }),
          },
          { additionalProperties: false },
        ),
      },
    },
    async (request) => {
      const session = await login(app.db, request.body.email, request.body.password, app.config.sessionTtlHours);
      return { object: 'session', token: session.token, expires_at: session.expires_at.toISOString() };
    },
  );

  app.post('/auth/logout', { config: { access: 'session' } }, async (request) => {
    if (request.principal.kind === 'session') await endSession(app.db, request.principal.sessionId);
    return { object: 'session', deleted: true };
  });
}
