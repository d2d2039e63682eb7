import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { checkAccess, resolveBearer } from '../../tenancy/credentials.ts';
import type { Access, Principal } from '../../tenancy/principal.ts';
import { handleError, handleNotFound } from './error-handler.ts';
import { validatorCompiler } from './validation.ts';
import { apiReference, API_REFERENCE_PREFIX } from './api-reference.ts';
import { healthRoutes } from './health-routes.ts';
import { authRoutes } from '../../tenancy/auth-routes.ts';
import { apiKeyRoutes } from '../../tenancy/api-key-routes.ts';
import { domainRoutes } from '../../domains/domain-routes.ts';
import { emailRoutes } from '../../emails/email-routes.ts';
import { lifecycleRoutes } from '../../emails/lifecycle-routes.ts';
import { webhookRoutes } from '../../webhooks/webhook-routes.ts';
import { templateRoutes } from '../../templates/template-routes.ts';
import { topicRoutes } from '../../contacts/topic-routes.ts';
import { contactRoutes } from '../../contacts/contact-routes.ts';
import { unsubscribeRoutes } from '../../contacts/unsubscribe-routes.ts';
import { trackingRoutes } from '../../tracking/tracking-routes.ts';
import { organizationRoutes } from '../../tenancy/organization-routes.ts';
import { suppressionRoutes } from '../../suppressions/suppression-routes.ts';
import { loadSigner, type Signer } from '../signing.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route; every route must say (checked when routes are added). */
    access?: Access;
  }
  interface FastifyRequest {
    /** Set by the authentication hook on every route whose access is not `public`. */
    principal: Principal;
  }
  interface FastifyInstance {
    db: Database;
    config: Config;
    /** Signs and checks the links Mailroom puts in messages (tracking, unsubscribe). */
    signer: Signer;
    /** Every route as "METHOD /path" with its access, in registration order (for tests and docs). */
    routeList: Array<{ method: string; url: string; access: Access }>;
  }
}

export type App = FastifyInstance<
  RawServerDefault,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export interface AppOptions {
  db: Database;
  config: Config;
  /** false silences the request log (tests). */
  logger?: boolean;
}

/** Builds the HTTP API. It does not listen: src/server.ts does, tests call app.inject(). */
export async function buildApp({ db, config, logger = true }: AppOptions): Promise<App> {
  const app = Fastify({
    logger: logger ? { level: config.logLevel } : false,
    bodyLimit: config.bodyLimitBytes,
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    logController: new LogController({
      disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace',
    }),
    return503OnClosing: true,
    // Signed link tokens (unsubscribe, tracking) travel as one path segment, up to signing.ts's limit;
    // Fastify's default of 100 characters would turn them into 414s.
    routerOptions: { maxParamLength: 8192 },
    // Errors Fastify raises before a route is found (a malformed Content-Type, an over-long segment)
    // get the same envelope as every other error.
    frameworkErrors: (error, request, reply) => handleError(error, request, reply),
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.decorate('db', db);
  app.decorate('config', config);
  app.decorate('signer', await loadSigner(db));
  app.decorateRequest('principal', null as never);
  app.setValidatorCompiler(validatorCompiler);
  // SDKs (Resend's among them) send Content-Type: application/json on bodiless POSTs such as
  // /domains/:id/verify: an empty body is no body, not a 400. Anything else parses as Fastify would.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    parseJson(request, body as string, done);
  });
  app.setErrorHandler(handleError);
  app.setNotFoundHandler(handleNotFound);

  app.decorate('routeList', []);
  app.addHook('onRoute', (route) => {
    // The browsable API reference (static pages of @fastify/swagger-ui) is public documentation.
    if (route.url === API_REFERENCE_PREFIX || route.url.startsWith(`${API_REFERENCE_PREFIX}/`)) {
      route.config = { ...route.config, access: 'public' };
      return;
    }
    const access = (route.config as { access?: Access } | undefined)?.access;
    if (!access) throw new Error(`Route ${route.method} ${route.url} does not declare config.access`);
    if (access === 'public') route.schema = { ...route.schema, security: [] }; // no credential, in the OpenAPI document
    for (const method of [route.method].flat()) {
      if (method !== 'HEAD') app.routeList.push({ method, url: route.url, access });
    }
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    const access = request.routeOptions.config.access;
    if (!access || access === 'public') return;
    const principal = await resolveBearer(db, request.headers.authorization);
    checkAccess(principal, access);
    request.principal = principal;
  });

  // On shutdown, answers still in flight tell keep-alive clients to go, so that close() does not wait
  // on connections that would otherwise stay open until their idle timeout.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });

  await apiReference(app);
  await app.register(healthRoutes);
  await app.register(authRoutes);
  await app.register(apiKeyRoutes);
  await app.register(domainRoutes);
  await app.register(templateRoutes);
  await app.register(emailRoutes);
  await app.register(lifecycleRoutes);
  await app.register(webhookRoutes);
  await app.register(topicRoutes);
  await app.register(contactRoutes);
  await app.register(unsubscribeRoutes);
  await app.register(trackingRoutes);
  await app.register(organizationRoutes);
  await app.register(suppressionRoutes);
  return app;
}
