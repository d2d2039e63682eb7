import type { App } from '../platform/http/app.ts';

export async function templateRoutes(_app: App) {}
