// Who may call an entry point, declared by each route (and checked by tenancy's authentication).

/**
 * What a route demands:
 * - `send`: any API key or a session (sending email);
 * - `full`: a full_access key or a session (reading and managing);
 * - `session`: a dashboard session only;
 * - `public`: no credential (health checks, login, links in messages).
 */
export type Access = 'public' | 'send' | 'full' | 'session';
