// Who is making a request. Resolved from the bearer token by the authentication hook (authentication.ts);
// routes read request.principal (declared on Fastify's request type below) and always scope their
// queries by principal.organizationId.

export type ApiKeyPermission = 'full_access' | 'sending_access';

export type Principal =
  | { kind: 'api_key'; organizationId: string; apiKeyId: string; permission: ApiKeyPermission }
  | { kind: 'session'; organizationId: string; sessionId: string; userId: string };

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the authentication hook on every route whose access is not `public`. */
    principal: Principal;
  }
}
