import type { App } from '../platform/http/app.ts';

/** Open pixel and click redirect. (Being written.) */
export async function trackingRoutes(_app: App) {}
