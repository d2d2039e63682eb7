// The one way the dashboard talks to Mailroom: its public API on the same origin, with the session's
// bearer token. Every failure becomes an ApiError carrying the API's error envelope
// ({ statusCode, name, message, field? }), so a page can show the message next to the field at fault.
import { endSession, getSession } from './session.ts';

export const SESSION_EXPIRED_MESSAGE = 'Your session has expired; sign in again.';

export class ApiError extends Error {
  /** HTTP status; 0 when Mailroom could not be reached. */
  readonly status: number;
  /** The envelope's `name` (e.g. `validation_error`), or `network_error` / `bad_response`. */
  readonly code: string;
  /** The request field the error is about, when the API names one (e.g. `name`, `to.0`). */
  readonly field: string | undefined;

  constructor(status: number, code: string, message: string, field?: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/** Query values: undefined and empty strings are left out. */
export type Query = Record<string, string | number | boolean | undefined | null>;

export interface RequestOptions {
  query?: Query;
  body?: unknown;
  signal?: AbortSignal;
  headers?: Record<string, string>;
  /** 'text': resolve with the body as text (a route answering text/plain, such as a raw source). */
  as?: 'json' | 'text';
  /** A multipart/form-data body (a file upload), sent instead of `body`; the browser sets its content type. */
  form?: FormData;
}

/** A path with its query string: `withQuery('/emails', { limit: 20, after: undefined })` → `/emails?limit=20`. */
export function withQuery(path: string, query: Query | undefined): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null || value === '') continue;
    params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}${path.includes('?') ? '&' : '?'}${text}` : path;
}

/** Calls the API; resolves with the parsed JSON body (undefined for an empty one), rejects with ApiError. */
export async function request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
  const session = getSession();
  const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
  if (session) headers.authorization = `Bearer ${session.token}`;
  if (options.body !== undefined && options.form === undefined) headers['content-type'] = 'application/json';

  let response: Response;
  try {
    response = await fetch(withQuery(path, options.query), {
      method,
      headers,
      body: options.form ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
      signal: options.signal,
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === 'AbortError') throw error;
    throw new ApiError(0, 'network_error', 'Mailroom could not be reached. Check your connection and try again.');
  }

  const text = await response.text();
  let body: unknown = undefined;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
  }
  if (response.ok) {
    if (options.as === 'text') return text as T;
    if (text && body === undefined) {
      throw new ApiError(response.status, 'bad_response', 'Mailroom sent an answer the dashboard cannot read.');
    }
    return body as T;
  }

  const envelope = (body ?? {}) as { name?: unknown; message?: unknown; field?: unknown };
  const error = new ApiError(
    response.status,
    typeof envelope.name === 'string' ? envelope.name : 'http_error',
    typeof envelope.message === 'string' && envelope.message
      ? envelope.message
      : `Mailroom answered ${response.status} ${response.statusText}`.trim(),
    typeof envelope.field === 'string' ? envelope.field : undefined,
  );
  // The session this request carried is no longer accepted (expired, or signed out elsewhere).
  if (response.status === 401 && session && getSession()?.token === session.token) {
    endSession(SESSION_EXPIRED_MESSAGE);
  }
  throw error;
}

export const api = {
  get: <T>(path: string, query?: Query, signal?: AbortSignal) => request<T>('GET', path, { query, signal }),
  getText: (path: string, signal?: AbortSignal) =>
    request<string>('GET', path, { signal, as: 'text', headers: { accept: 'text/plain' } }),
  post: <T>(path: string, body?: unknown, options: Omit<RequestOptions, 'body'> = {}) =>
    request<T>('POST', path, { ...options, body }),
  patch: <T>(path: string, body?: unknown) => request<T>('PATCH', path, { body }),
  put: <T>(path: string, body?: unknown) => request<T>('PUT', path, { body }),
  /** POSTs a multipart/form-data body (files and fields). */
  upload: <T>(path: string, form: FormData) => request<T>('POST', path, { form }),
  delete: <T>(path: string) => request<T>('DELETE', path),
};

/** A list as every list route answers it. */
export interface ListResponse<T> {
  object: 'list';
  has_more: boolean;
  data: T[];
}

/** The message for a field from an error, when the error is about that field (`to` also matches `to.0`). */
export function fieldError(error: unknown, field: string): string | undefined {
  if (!(error instanceof ApiError) || error.field === undefined) return undefined;
  return error.field === field || error.field.startsWith(`${field}.`) ? error.message : undefined;
}

/** A message in words for anything a request can throw. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error && error.message) return error.message;
  return 'Something went wrong. Try again.';
}

/** Encodes one path segment: `api.get(\`/emails/${segment(id)}\`)`. */
export const segment = (value: string) => encodeURIComponent(value);
