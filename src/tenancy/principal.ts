// Who is making a request. Resolved from the bearer token by authenticate(); routes read
// request.principal and always scope their queries by principal.organizationId.

export type ApiKeyPermission = 'full_access' | 'sending_access';

export type Principal =
  | { kind: 'api_key'; organizationId: string; apiKeyId: string; permission: ApiKeyPermission }
  | { kind: 'session'; organizationId: string; sessionId: string; userId: string };

/**
 * What a route demands:
 * - `send`: any API key or a session (sending email);
 * - `full`: a full_access key or a session (reading and managing);
 * - `session`: a dashboard session only;
 * - `public`: no credential (health checks, login).
 */
export type Access = 'public' | 'send' | 'full' | 'session';
