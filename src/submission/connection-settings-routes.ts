import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { publicBaseUrl, type Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import { EMBEDDED_SUBMISSION_PORT } from './start-submission.ts';

// Where a client reaches this Mailroom: the API's base URL and the SMTP submission listeners, from the
// settings the server runs with, so that the dashboard's first-run examples are this install's and not
// a guess. No secret is in it: the password is always an API key, which the caller holds.

/** The user names the submission listeners accept (`resend` so Resend's SMTP settings work unchanged). */
export const SUBMISSION_USER_NAMES = ['mailroom', 'resend'];

const SmtpListener = Type.Object({
  port: Type.Integer(),
  security: Type.Union([Type.Literal('starttls'), Type.Literal('tls')], {
    description: 'starttls: upgrade after connecting; tls: TLS from the first byte',
  }),
});

const ConnectionSettings = Type.Object({
  object: Type.Literal('connection_settings'),
  api_url: Type.String({ description: 'Base URL of the API (MAILROOM_PUBLIC_URL, else http://HOST:PORT)' }),
  smtp: Type.Object({
    host: Type.String({ description: "The host applications connect to: the public URL's" }),
    listeners: Type.Array(SmtpListener, { description: 'Empty when SMTP submission is off' }),
    usernames: Type.Array(Type.String()),
    password: Type.String({ description: 'What goes in the password: always an API key' }),
  }),
});

export function connectionSettings(config: Config, databaseKind: Database['kind']) {
  const apiUrl = publicBaseUrl(config);
  // As start-submission.ts decides: the embedded default listens on 127.0.0.1:2587 unless told otherwise.
  const byDefault = config.submissionPort === undefined && databaseKind === 'pglite';
  const startTls = byDefault ? EMBEDDED_SUBMISSION_PORT : config.submissionPort;
  const listeners = [
    ...(typeof startTls === 'number' && startTls !== 0 ? [{ port: startTls, security: 'starttls' as const }] : []),
    ...(typeof config.submissionsPort === 'number' && config.submissionsPort !== 0
      ? [{ port: config.submissionsPort, security: 'tls' as const }]
      : []),
  ];
  return {
    object: 'connection_settings' as const,
    api_url: apiUrl,
    smtp: {
      host: byDefault ? '127.0.0.1' : new URL(apiUrl).hostname.replace(/^\[|\]$/g, ''),
      listeners,
      usernames: SUBMISSION_USER_NAMES,
      password: 'an API key (full_access or sending_access)',
    },
  };
}

export async function connectionSettingsRoutes(app: App) {
  app.get(
    '/connection-settings',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Where clients reach this Mailroom: the API base URL and the SMTP submission settings',
        response: { 200: ConnectionSettings },
      },
    },
    () => connectionSettings(app.config, app.db.kind),
  );
}
