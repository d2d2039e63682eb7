import type { LookupAddress, LookupOptions } from 'node:dns';
import { isIP, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import type { Config } from '../platform/config.ts';
import { isTlsErrorCode } from '../platform/network-errors.ts';
import { createHostResolver, forbiddenAddressReason, HostResolutionError } from './endpoint-address.ts';

// The HTTP client of webhook deliveries: it reaches only the addresses a webhook may reach
// (endpoint-address.ts), and one attempt is one POST, answered or not within its deadline. The endpoint was
// checked at registration, but its DNS may change since: so every new connection is checked again at
// connect time, on the very addresses the socket will use. The connector's `lookup` resolves the name
// once and refuses when any answer is forbidden; net.connect connects only to what that lookup returned,
// so there is no second look-up to race. IP-literal hosts skip `lookup` inside net.connect and are
// checked before connecting; the remote address of every connected socket is checked once more.
// Redirects are never followed (undici's request does not; no redirect interceptor is composed here):
// a 3xx is just a non-2xx answer, which the delivery rules fail at once.

export const BODY_PREFIX_BYTES = 1024;

/** Why an attempt got no HTTP answer, for the attempt log. */
export type WebhookFailureReason =
  | 'forbidden_address' // the host is, or resolves to, an address webhooks may not reach
  | 'dns_failed' // the host name did not resolve, or its look-up failed
  | 'timeout' // no connection, or no complete answer head, within MAILROOM_WEBHOOK_TIMEOUT_MS
  | 'connection_failed' // refused, reset, unreachable, closed before answering
  | 'tls_failed' // TLS handshake or certificate check failed
  | 'protocol_error' // the answer was not valid HTTP
  | 'invalid_request'; // the URL or headers given cannot be sent

/** Raised inside the connector when the address about to be connected to is forbidden. */
export class ForbiddenAddressError extends Error {
  readonly code = 'ERR_WEBHOOK_FORBIDDEN_ADDRESS';
  readonly address: string;
  constructor(host: string, address: string, problem: string) {
    super(host === address ? `${address} is ${problem}` : `${host} resolves to ${address}, ${problem}`);
    this.name = 'ForbiddenAddressError';
    this.address = address;
  }
}

type LookupCallback = (error: Error | null, address: string | LookupAddress[], family?: number) => void;

/** The attempt deadline (MAILROOM_WEBHOOK_TIMEOUT_MS) of each dispatcher made here, for postJson. */
const attemptTimeouts = new WeakMap<Dispatcher, number>();

export interface SafeDispatcherOptions {
  /** Connections kept to one origin at a time; default MAILROOM_WEBHOOK_CONNECTIONS_PER_ENDPOINT. */
  connectionsPerOrigin?: number;
  /** The certificates TLS trusts (default: Node's); e.g. the system's and an operator's private CA. */
  ca?: string[];
}

export function createSafeDispatcher(config: Config, options: SafeDispatcherOptions = {}): Dispatcher {
  const allow = config.webhookAllowCidrs;
  const resolveHost = createHostResolver(config);

  const lookup = (hostname: string, lookupOptions: LookupOptions, callback: LookupCallback): void => {
    resolveHost(hostname)
      .then((addresses) => {
        // Any forbidden answer refuses the whole name, as at registration: the answers are the candidates
        // the socket would try, and a name that mixes public and private addresses is not a receiver.
        for (const { address } of addresses) {
          const problem = forbiddenAddressReason(address, allow);
          if (problem !== undefined) throw new ForbiddenAddressError(hostname, address, problem);
        }
        const family = lookupOptions.family === 'IPv4' ? 4 : lookupOptions.family === 'IPv6' ? 6 : lookupOptions.family;
        const usable = family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses;
        if (usable.length === 0) throw new HostResolutionError(hostname, true, `no IPv${family} address`);
        return usable;
      })
      .then(
        (usable) =>
          lookupOptions.all ? callback(null, usable) : callback(null, usable[0]!.address, usable[0]!.family),
        (error: Error) => callback(error, ''),
      );
  };

  const connectTo = buildConnector({
    timeout: config.webhookTimeoutMs,
    lookup,
    ...(options.ca ? { ca: options.ca } : {}),
  });
  const connect: buildConnector.connector = (connectOptions, callback) => {
    const host = connectOptions.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) !== 0) {
      // net.connect does not call `lookup` for an IP address: check it here, before any socket exists.
      const problem = forbiddenAddressReason(host, allow);
      if (problem !== undefined) return callback(new ForbiddenAddressError(host, host, problem), null);
    }
    connectTo(connectOptions, (error, socket) => {
      if (error !== null) return callback(error, null);
      // Belt and braces: the address the socket did connect to passes the same rule.
      const remote = (socket as Socket).remoteAddress ?? '(unknown)';
      const problem = forbiddenAddressReason(remote, allow);
      if (problem !== undefined) {
        socket.destroy();
        return callback(new ForbiddenAddressError(host, remote, problem), null);
      }
      callback(null, socket);
    });
  };

  const agent = new Agent({
    connect,
    connections: options.connectionsPerOrigin ?? config.webhookConnectionsPerEndpoint,
    headersTimeout: config.webhookTimeoutMs,
    bodyTimeout: config.webhookTimeoutMs,
  });
  attemptTimeouts.set(agent, config.webhookTimeoutMs);
  return agent;
}

/** An HTTP answer, whatever its status. */
export interface PostJsonAnswer {
  status: number;
  /** The first 1 KiB of the answer, as UTF-8 (an incomplete last character dropped). */
  body: string;
  durationMs: number;
}

/** No HTTP answer: why, for the attempt log (the delivery rules retry transport failures). */
export interface PostJsonFailure {
  reason: WebhookFailureReason;
  /** Detail for humans, e.g. "hooks.example.com resolves to 10.0.0.1, a private address". */
  message: string;
  durationMs: number;
}

export type PostJsonResult = PostJsonAnswer | PostJsonFailure;

/**
 * POSTs `body` (JSON; content-type added unless given) and never throws. An HTTP answer of any status
 * gives { status, body, durationMs } (a 3xx is returned, not followed); no answer gives
 * { reason, message, durationMs }: forbidden address, DNS, timeout, connection, TLS or protocol failure.
 * Only the first 1 KiB of the answer is read; the rest is dropped unread. Once the status has arrived the
 * attempt has its answer: a body that then stalls or breaks off gives what had arrived.
 *
 * It is undici's dispatch with a handler of its own, not `request`: an attempt makes no response stream,
 * no async iterator and no AbortSignal, a quarter of the client's work per delivery; and its deadline is
 * one timer, cleared as soon as the attempt is over.
 */
export function postJson(
  dispatcher: Dispatcher,
  url: string | URL,
  body: string,
  headers: Record<string, string> = {},
): Promise<PostJsonResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);

  const target = URL.parse(String(url));
  if (target === null || (target.protocol !== 'http:' && target.protocol !== 'https:')) {
    return Promise.resolve({
      reason: 'invalid_request',
      message: `not an http or https URL: ${String(url)}`,
      durationMs: elapsed(),
    });
  }
  // A dispatcher made by createSafeDispatcher has its deadline; any other has only its own time-outs.
  const timeoutMs = attemptTimeouts.get(dispatcher);
  const hasContentType = Object.keys(headers).some((name) => name.toLowerCase() === 'content-type');

  return new Promise<PostJsonResult>((resolve) => {
    let controller: Dispatcher.DispatchController | undefined;
    // The deadline passed: the attempt was ended from this side.
    let timedOut = false;
    let status: number | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;

    const endAttempt = () => {
      timedOut = true;
      // Before the request has a controller (waiting for a connection) it is aborted when it gets one.
      controller?.abort(new AttemptEnded('deadline'));
      // An answer whose status has come is what had arrived; otherwise the attempt failed.
      if (status !== undefined) answer(true);
      else fail(undefined);
    };
    const timer = timeoutMs === undefined ? undefined : setTimeout(endAttempt, timeoutMs);
    // A pending deadline never keeps the process alive on its own.
    timer?.unref();

    const finish = (result: PostJsonResult) => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      resolve(result);
    };
    const answer = (cut: boolean) => {
      const bytes = Buffer.concat(chunks).subarray(0, BODY_PREFIX_BYTES);
      // A cut prefix may end inside a character: { stream } drops the incomplete last one.
      finish({ status: status!, body: new TextDecoder().decode(bytes, { stream: cut }), durationMs: elapsed() });
    };
    const fail = (error: unknown) => {
      finish(
        timedOut
          ? { reason: 'timeout', message: `no answer within ${timeoutMs} ms`, durationMs: elapsed() }
          : { reason: reasonOf(error), message: describe(error), durationMs: elapsed() },
      );
    };

    // undici reports what it refuses (a header that cannot be sent) through onResponseError; another
    // dispatcher may throw instead, which is the attempt's failure too, never a rejection.
    try {
      dispatcher.dispatch(
        {
          origin: target.origin,
          path: `${target.pathname}${target.search}`,
          method: 'POST',
          headers: hasContentType ? headers : { 'content-type': 'application/json', ...headers },
          body,
        },
        {
          onRequestStart(requestController) {
            controller = requestController;
            if (timedOut) requestController.abort(new AttemptEnded('deadline'));
          },
          onResponseStart(_controller, statusCode) {
            // 1xx interim answers are not the answer.
            if (statusCode >= 200) status = statusCode;
          },
          onResponseData(responseController, chunk) {
            if (over) return;
            chunks.push(chunk);
            size += chunk.length;
            if (size > BODY_PREFIX_BYTES) {
              // Enough read. The rest is not buffered: the request is aborted once this read of the socket
              // is parsed, which drops the connection if more of the answer is still to come, and does
              // nothing if the answer ended in the same read (the connection stays in the pool).
              answer(true);
              queueMicrotask(() => responseController.abort(new AttemptEnded('prefix read')));
            }
          },
          onResponseEnd() {
            answer(size > BODY_PREFIX_BYTES);
          },
          onResponseError(_controller, error) {
            // The answer broke off after its status: keep what had arrived.
            if (status !== undefined) answer(true);
            else fail(error);
          },
        },
      );
    } catch (error) {
      fail(error);
    }
  });
}

/** The reason an attempt was ended from this side, given to undici's abort. */
class AttemptEnded extends Error {
  constructor(why: string) {
    super(`attempt ended: ${why}`);
    this.name = 'AttemptEnded';
  }
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);
const PROTOCOL_CODES = new Set([
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'UND_ERR_RES_EXCEEDED_MAX_SIZE',
  'UND_ERR_INFO',
  'UND_ERR_NOT_SUPPORTED',
]);

/** The reason of a transport error: the first cause in the chain with a code we know. */
export function reasonOf(error: unknown): WebhookFailureReason {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    if (current instanceof ForbiddenAddressError) return 'forbidden_address';
    if (current instanceof HostResolutionError) return 'dns_failed';
    const code = (current as NodeJS.ErrnoException).code ?? '';
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns_failed';
    if (TIMEOUT_CODES.has(code) || current.name === 'TimeoutError') return 'timeout';
    if (isTlsErrorCode(code)) return 'tls_failed';
    if (code.startsWith('HPE_') || PROTOCOL_CODES.has(code)) return 'protocol_error';
    if (code === 'UND_ERR_INVALID_ARG' || code === 'ERR_INVALID_URL') return 'invalid_request';
  }
  return 'connection_failed';
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as NodeJS.ErrnoException).code;
  return code !== undefined && !error.message.includes(code) ? `${code}: ${error.message}` : error.message;
}
