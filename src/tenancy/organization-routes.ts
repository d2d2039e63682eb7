import type { App } from '../platform/http/app.ts';

/** The organization's own settings. (Being written.) */
export async function organizationRoutes(_app: App) {}
