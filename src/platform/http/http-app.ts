import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { Signer } from '../signing.ts';
import { randomUUID } from 'node:crypto';
import Fastify, { LogController } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { answerClientError, handleError, handleNotFound } from './error-handler.ts';
import { validatorCompiler } from './validation.ts';
import { apiReference, API_REFERENCE_PREFIX } from './api-reference.ts';
import { healthRoutes, type ReadinessCheck } from './health-routes.ts';
import { httpRequestDuration, httpRequests } from '../metrics.ts';
import { ServiceError } from '../errors.ts';
import { findUnstorableText } from '../text.ts';
import { checkJsonDepth } from './json-body.ts';
import type { Access, App } from './app-types.ts';

// The HTTP framework as every route finds it: request ids, the one error envelope, body validation, the
// OpenAPI reference, health checks, and the rule that every route declares who may call it. Which
// routes exist, and how a credential becomes a principal, is decided by the composition root (src/app.ts).

export interface HttpAppOptions {
  db: Database;
  config: Config;
  signer: Signer;
  /** false silences the request log (tests). */
  logger?: boolean;
  /** What `/readyz` checks beyond the database (a worker's queue lag). */
  readinessChecks?: ReadinessCheck[];
}

/**
 * Credentials never reach the log. Fastify's request serializer logs no header, so these paths only
 * matter if a request or its headers are ever logged whole (`{ req }`, `{ headers }`); a session or API
 * key travels only in the Authorization header, never in a URL.
 */
const REDACTED = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
  'request.headers.authorization',
];

/** A Fastify instance with the framework in place and no domain route yet. It does not listen. */
export async function createHttpApp({
  db,
  config,
  signer,
  logger = true,
  readinessChecks = [],
}: HttpAppOptions): Promise<App> {
  const app = Fastify({
    logger: logger ? { level: config.logLevel, redact: { paths: REDACTED, censor: '[redacted]' } } : false,
    bodyLimit: config.bodyLimitBytes,
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    logController: new LogController({
      disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace',
    }),
    return503OnClosing: true,
    // A client that trickles its request is cut off; idle keep-alive connections outlive a balancer's.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    http: { headersTimeout: Math.min(config.requestTimeoutMs, 60_000), connectionsCheckingInterval: 1000 },
    // Requests Node refuses before Fastify sees them (malformed, too slow) get the envelope too.
    clientErrorHandler: answerClientError,
    // Signed link tokens (unsubscribe, tracking) travel as one path segment, up to signing.ts's limit;
    // Fastify's default of 100 characters would turn them into 414s.
    routerOptions: { maxParamLength: 8192 },
    // Errors Fastify raises before a route is found (a malformed Content-Type, an over-long segment)
    // get the same envelope as every other error.
    frameworkErrors: (error, request, reply) => handleError(error, request, reply),
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.decorate('db', db);
  app.decorate('config', config);
  app.decorate('signer', signer);
  app.setValidatorCompiler(validatorCompiler);
  // SDKs (Resend's among them) send Content-Type: application/json on bodiless POSTs such as
  // /domains/:id/verify: an empty body is no body, not a 400. Anything else parses as Fastify would,
  // and a body nested deeper than MAX_JSON_DEPTH is refused here, before anything walks it.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    parseJson(request, body as string, (error, value) => {
      if (error) return done(error);
      try {
        checkJsonDepth(value);
      } catch (tooDeep) {
        return done(tooDeep as ServiceError);
      }
      done(null, value);
    });
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
  });
  // One place for every string that arrives, at any depth of the body, the query string and the path:
  // what the database cannot store is refused by name here, before any route's schema or handler.
  app.addHook('preValidation', async (request) => {
    for (const [part, value] of [
      ['body', request.body],
      ['query', request.query],
      ['params', request.params],
    ] as const) {
      const field = findUnstorableText(value);
      if (field === undefined) continue;
      throw new ServiceError(
        'validation_error',
        `${field === '' ? part : field} contains a character that cannot be stored (U+0000 or an unpaired surrogate)`,
        field === '' ? part : field,
      );
    }
  });
  // Route templates, never paths: ids and tokens would make the label unbounded.
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    httpRequestDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
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
  await app.register(healthRoutes(readinessChecks));
  return app;
}
