import type { App } from '../platform/http/app.ts';

/** Resend's /contacts. (Being written.) */
export async function contactRoutes(_app: App) {}
