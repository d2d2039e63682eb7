import { request, type Dispatcher } from 'undici';
import type { Config } from '../platform/config.ts';
import { ServiceError } from '../platform/errors.ts';
import { createSafeDispatcher, reasonOf, type WebhookFailureReason } from '../webhooks/safe-dispatcher.ts';

// Attachments given by `path` (a URL where the file is hosted) are fetched once, when the message is
// accepted, and stored like attachments sent as base64: an accepted message never depends on a URL that
// may expire (pre-signed links) or change before it is delivered. The fetch goes through the same guard
// as webhooks: only public addresses (MAILROOM_WEBHOOK_ALLOW_CIDRS exempts ranges), checked on the very
// address each connection uses, so a URL cannot reach the service's own network. Redirects are followed
// up to MAX_REDIRECTS, each hop through that guard.

export const ATTACHMENT_FETCH_TIMEOUT_MS = 15_000;
const MAX_REDIRECTS = 5;
const MIME_TYPE = /^[a-z0-9][\w.+-]*\/[a-z0-9][\w.+-]*$/;

export interface FetchedAttachment {
  content: Buffer;
  /** The answer's Content-Type, without parameters, when it gave one. */
  contentType: string | undefined;
}

export interface AttachmentFetcher {
  /**
   * Fetches a URL of at most maxBytes (what the message's attachments have left of totalLimit); a
   * ServiceError (invalid_attachment, or payload_too_large) names the field.
   */
  fetch(url: URL, options: { field: string; maxBytes: number; totalLimit: number }): Promise<FetchedAttachment>;
}

const fetchers = new WeakMap<Config, AttachmentFetcher>();

/** One fetcher (one connection pool) per configuration. */
export function attachmentFetcherFor(config: Config): AttachmentFetcher {
  let fetcher = fetchers.get(config);
  if (!fetcher) {
    fetcher = createAttachmentFetcher(config);
    fetchers.set(config, fetcher);
  }
  return fetcher;
}

export function createAttachmentFetcher(config: Config): AttachmentFetcher {
  let dispatcher: Dispatcher | undefined;
  return {
    async fetch(url, { field, maxBytes, totalLimit }) {
      dispatcher ??= createSafeDispatcher(
        { ...config, webhookTimeoutMs: ATTACHMENT_FETCH_TIMEOUT_MS },
        { connectionsPerOrigin: 4 },
      );
      const signal = AbortSignal.timeout(ATTACHMENT_FETCH_TIMEOUT_MS);
      const refuse = (why: string) =>
        new ServiceError('invalid_attachment', `${field} could not be fetched from ${url.origin}: ${why}`, field);
      // The file host's own trouble, not the request's: 503, remembered under no idempotency key.
      const unavailable = (why: string) =>
        new ServiceError(
          'service_unavailable',
          `${field} could not be fetched from ${url.origin}: ${why}; try again later`,
          field,
        );
      let current = url;
      for (let hop = 0; ; hop += 1) {
        let response: Dispatcher.ResponseData;
        try {
          response = await request(current, { dispatcher, method: 'GET', signal });
        } catch (error) {
          if (signal.aborted) throw unavailable(`no answer within ${ATTACHMENT_FETCH_TIMEOUT_MS} ms`);
          const reason = reasonOf(error);
          throw TRANSIENT.has(reason) ? unavailable(FAILURES[reason]) : refuse(FAILURES[reason]);
        }
        const location = response.headers.location;
        if (response.statusCode >= 300 && response.statusCode < 400 && typeof location === 'string') {
          await response.body.dump();
          if (hop >= MAX_REDIRECTS) throw refuse(`more than ${MAX_REDIRECTS} redirects`);
          current = new URL(location, current);
          if (current.protocol !== 'https:' && current.protocol !== 'http:')
            throw refuse('redirected to a non-HTTP URL');
          continue;
        }
        if (response.statusCode !== 200) {
          await response.body.dump();
          const status = response.statusCode;
          throw status >= 500 || status === 429 || status === 408
            ? unavailable(`HTTP ${status}`)
            : refuse(`HTTP ${status}`);
        }
        const declared = Number(response.headers['content-length']);
        if (Number.isFinite(declared) && declared > maxBytes) {
          await response.body.dump();
          throw tooLarge(field, totalLimit);
        }
        const chunks: Buffer[] = [];
        let size = 0;
        try {
          for await (const chunk of response.body as AsyncIterable<Buffer>) {
            size += chunk.length;
            if (size > maxBytes) {
              response.body.destroy();
              throw tooLarge(field, totalLimit);
            }
            chunks.push(chunk);
          }
        } catch (error) {
          if (error instanceof ServiceError) throw error;
          throw unavailable(signal.aborted ? `no answer within ${ATTACHMENT_FETCH_TIMEOUT_MS} ms` : describe(error));
        }
        const type = response.headers['content-type'];
        const contentType = typeof type === 'string' ? type.split(';')[0]!.trim().toLowerCase() : '';
        return { content: Buffer.concat(chunks), contentType: MIME_TYPE.test(contentType) ? contentType : undefined };
      }
    },
  };
}

const tooLarge = (field: string, maxBytes: number) =>
  new ServiceError('payload_too_large', `Attachments may total at most ${maxBytes} bytes once decoded`, field);

/** Why a fetch got no answer, in words that name no address the caller did not give. */
const FAILURES: Record<WebhookFailureReason, string> = {
  forbidden_address: 'the host is, or resolves to, an address Mailroom may not reach',
  dns_failed: 'the host name did not resolve',
  timeout: `no answer within ${ATTACHMENT_FETCH_TIMEOUT_MS} ms`,
  connection_failed: 'the connection failed',
  tls_failed: 'the TLS handshake or certificate check failed',
  protocol_error: 'the answer was not valid HTTP',
  invalid_request: 'the URL cannot be requested',
};

const describe = (error: unknown) => FAILURES[reasonOf(error)];

/** Failures a retry may not meet again. */
const TRANSIENT: ReadonlySet<WebhookFailureReason> = new Set(['timeout', 'connection_failed']);
