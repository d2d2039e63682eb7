// The composition root: the one place that knows every domain. It builds the HTTP API from the
// framework (platform/http) and each domain's routes; src/server.ts runs it, tests call app.inject().
import type { Config } from './platform/config.ts';
import type { Database } from './platform/db/database.ts';
import { createHttpApp } from './platform/http/http-app.ts';
import type { App } from './platform/http/app-types.ts';
import { loadSigner } from './platform/signing.ts';
import {
  setDestinationStatsSource,
  setPoolStatsSource,
  setQueueStatsSource,
  setWarmupStatsSource,
} from './platform/metrics.ts';
import { loadShapingFile } from './shaping/shaping-file.ts';
import { destinationStats } from './shaping/destinations.ts';
import { warmupStats } from './shaping/sources.ts';
import type { ReadinessCheck } from './platform/http/health-routes.ts';
import { QUEUES, queueStats } from './queue/jobs.ts';
import { installAuthentication } from './tenancy/authentication.ts';
import { authRoutes } from './tenancy/auth-routes.ts';
import { apiKeyRoutes } from './tenancy/api-key-routes.ts';
import { organizationRoutes } from './tenancy/organization-routes.ts';
import { domainRoutes } from './domains/domain-routes.ts';
import { templateRoutes } from './templates/template-routes.ts';
import { emailRoutes } from './emails/email-routes.ts';
import { lifecycleRoutes } from './emails/lifecycle-routes.ts';
import { emailListRoutes } from './emails/email-list-routes.ts';
import { receivedEmailRoutes } from './receiving/received-email-routes.ts';
import { overviewRoutes } from './emails/overview-routes.ts';
import { metricsRoutes } from './emails/metrics-routes.ts';
import { previewRoutes } from './emails/preview-routes.ts';
import { rawSourceRoutes } from './delivery/raw-source-routes.ts';
import { webhookRoutes } from './webhooks/webhook-routes.ts';
import { topicRoutes } from './contacts/topic-routes.ts';
import { contactRoutes } from './contacts/contact-routes.ts';
import { contactImportRoutes } from './contacts/imports/import-routes.ts';
import { contactPropertyRoutes } from './contacts/contact-property-routes.ts';
import { segmentRoutes } from './contacts/segment-routes.ts';
import { broadcastRoutes } from './broadcasts/broadcast-routes.ts';
import { eventRoutes } from './automations/event-routes.ts';
import { automationRoutes } from './automations/automation-routes.ts';
import { inboundRouteRoutes } from './receiving/inbound-route-routes.ts';
import { unsubscribeRoutes } from './contacts/unsubscribe-routes.ts';
import { trackingRoutes } from './tracking/tracking-routes.ts';
import { suppressionRoutes } from './suppressions/suppression-routes.ts';
import { destinationRoutes } from './shaping/destination-routes.ts';
import { doctorRoutes } from './doctor/doctor-routes.ts';
import { dashboardRoutes } from './dashboard/dashboard-routes.ts';
import { docsRoutes } from './dashboard/docs-routes.ts';
import { connectionSettingsRoutes } from './submission/connection-settings-routes.ts';
import { cacheLookups } from './platform/db/lookup-cache.ts';
import { installRequestLog } from './request-log/recorder.ts';
import { requestLogRoutes } from './request-log/request-log-routes.ts';
import { searchRoutes } from './search/search-routes.ts';

export type { App } from './platform/http/app-types.ts';

export interface AppOptions {
  db: Database;
  config: Config;
  /** false silences the request log (tests). */
  logger?: boolean;
  /** The process runs workers: `/readyz` also fails while their queues are behind. */
  runsWorkers?: boolean;
}

/** Builds the HTTP API. It does not listen: src/server.ts does, tests call app.inject(). */
export async function buildApp({ db, config, logger = true, runsWorkers = false }: AppOptions): Promise<App> {
  const app = await buildOpsApp({ db, config, logger, runsWorkers });
  installAuthentication(app);
  // After authentication: it records the requests of API keys, once they are known.
  installRequestLog(app);
  for (const routes of [
    authRoutes,
    apiKeyRoutes,
    domainRoutes,
    templateRoutes,
    emailRoutes,
    lifecycleRoutes,
    emailListRoutes,
    receivedEmailRoutes,
    previewRoutes,
    rawSourceRoutes,
    overviewRoutes,
    metricsRoutes,
    webhookRoutes,
    topicRoutes,
    contactRoutes,
    contactImportRoutes,
    contactPropertyRoutes,
    segmentRoutes,
    broadcastRoutes,
    eventRoutes,
    automationRoutes,
    inboundRouteRoutes,
    unsubscribeRoutes,
    trackingRoutes,
    organizationRoutes,
    suppressionRoutes,
    destinationRoutes,
    doctorRoutes,
    requestLogRoutes,
    connectionSettingsRoutes,
    searchRoutes,
    // The web dashboard's page and files at `/` and `/assets/` (it calls the routes above like any client).
    dashboardRoutes(),
    // This version's documentation at `/guide/<page>`, where the dashboard's "Learn more" links go.
    docsRoutes(),
  ]) {
    await app.register(routes);
  }
  // API keys and sending domains are answered from memory while the app runs, and forgotten on every
  // change, in any process (src/platform/db/lookup-cache.ts). If listening cannot start, nothing is cached.
  const stopCaching = await cacheLookups(db).catch(() => undefined);
  if (stopCaching) app.addHook('onClose', stopCaching);
  return app;
}

/**
 * The framework with health, readiness and metrics and no domain route: what a worker-only process
 * serves on MAILROOM_METRICS_PORT (the API builds on it).
 */
export async function buildOpsApp({ db, config, logger = true, runsWorkers = false }: AppOptions): Promise<App> {
  setQueueStatsSource(() => queueStats(db, QUEUES));
  setPoolStatsSource(() => db.poolStats?.());
  // Read once here, not at every scrape.
  const shaping = loadShapingFile(config.shapingFile);
  setDestinationStatsSource(() => destinationStats(db, shaping));
  setWarmupStatsSource(() => warmupStats(db, shaping.egress));
  const readinessChecks = runsWorkers ? [queueLagCheck(db, config.readyMaxQueueLagSeconds)] : [];
  return createHttpApp({ db, config, signer: await loadSigner(db), logger, readinessChecks });
}

/** Not ready while a queue's oldest due job has waited longer than the limit (the workers are behind). */
function queueLagCheck(db: Database, limitSeconds: number): ReadinessCheck {
  return async () => {
    const behind = (await queueStats(db, QUEUES)).find((stats) => stats.oldestDueSeconds > limitSeconds);
    return behind
      ? `The ${behind.queue} queue is behind: its oldest due job has waited ${Math.round(behind.oldestDueSeconds)} s (limit ${limitSeconds} s)`
      : undefined;
  };
}
