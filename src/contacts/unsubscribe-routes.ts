import type { App } from '../platform/http/app.ts';

/** One-click unsubscribe (RFC 8058). (Being written.) */
export async function unsubscribeRoutes(_app: App) {}
