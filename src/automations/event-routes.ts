import type { App } from '../platform/http/app-types.ts';

/** Resend's /events: named events with their payload schema, and POST /events/send. */
export async function eventRoutes(_app: App) {}
