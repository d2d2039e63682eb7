import type { App } from '../platform/http/app.ts';

export async function emailRoutes(_app: App) {}
