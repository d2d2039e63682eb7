import type { App } from '../platform/http/app.ts';

/** The suppression list. (Being written.) */
export async function suppressionRoutes(_app: App) {}
