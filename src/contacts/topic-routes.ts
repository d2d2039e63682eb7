import type { App } from '../platform/http/app.ts';

/** Resend's /topics. (Being written.) */
export async function topicRoutes(_app: App) {}
