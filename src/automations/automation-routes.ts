import type { App } from '../platform/http/app-types.ts';

/** Resend's /automations: their graphs, status, copies and runs. */
export async function automationRoutes(_app: App) {}
