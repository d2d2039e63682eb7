// Who is making a request. Resolved from the bearer token by the authentication hook (authentication.ts);
// routes read request.principal (declared on Fastify's request type below) and always scope their
// queries by principal.organizationId.

export type ApiKeyPermission = 'full_access' | 'sending_access';

export type Principal =
  | {
      kind: 'api_key';
      organizationId: string;
      apiKeyId: string;
      permission: ApiKeyPermission;
      /** The one domain the key may send from (a From address at any other is refused); null for all. */
      domainId: string | null;
    }
  | { kind: 'session'; organizationId: string; sessionId: string; userId: string };

/** The one domain a principal may send from (an API key's domain_id); null for any of its organization's. */
export const keyDomainOf = (principal: Principal): string | null =>
  principal.kind === 'api_key' ? principal.domainId : null;

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the authentication hook on every route whose access is not `public`. */
    principal: Principal;
  }
}
