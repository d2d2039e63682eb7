import { Counter } from 'prom-client';
import type { FastifyRequest } from 'fastify';
import type { App } from '../platform/http/app-types.ts';
import type { Database } from '../platform/db/database.ts';
import { Batcher } from '../platform/db/batcher.ts';
import { registry } from '../platform/metrics.ts';
import { newRowId } from '../platform/ids.ts';
import { loggedBody } from './redact.ts';
import { insertRequestLogs, type RequestLogEntry } from './request-logs.ts';

// Every request made with an API key is recorded, without costing the request a database round trip:
// the answer is sent first, then its entry waits in this process's memory and is written with the
// others that arrived within FLUSH_DELAY_MS, in one statement. The buffer is bounded: when the database
// cannot keep up, new entries are dropped and counted rather than held without limit. An entry still in
// memory when the process dies is lost; the log is a debugging aid, not a record of accepted work.

/** How long the first entry into an empty buffer waits for others to be written with it. */
export const FLUSH_DELAY_MS = 200;
/** Entries (their bodies mostly) held in memory, written or waiting, at most. */
export const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;
const MAX_BATCH_ENTRIES = 500;
/** An entry's columns other than its bodies, roughly. */
const ENTRY_OVERHEAD_BYTES = 512;

export const requestLogDropped = new Counter({
  name: 'mailroom_request_log_dropped_total',
  help: 'Request log entries not kept: buffer_full (the database fell behind), write_failed',
  labelNames: ['reason'] as const,
  registers: [registry],
});

declare module 'fastify' {
  interface FastifyInstance {
    /** The request log's buffer of this app (GET /logs reads what it wrote). */
    requestLog: RequestLogRecorder;
  }
}

interface RecorderOptions {
  maxBufferedBytes?: number;
  flushDelayMs?: number;
  onWriteError?: (error: unknown) => void;
}

export class RequestLogRecorder {
  private readonly batcher: Batcher<RequestLogEntry, void>;
  private buffered: RequestLogEntry[] = [];
  private bufferedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly writing = new Set<Promise<void>>();
  private readonly maxBufferedBytes: number;
  private readonly onWriteError: RecorderOptions['onWriteError'];
  /** The time entries are stamped with; replaced in tests. */
  now: () => Date = () => new Date();
  /** How long the first entry into an empty buffer waits (lengthened in tests). */
  flushDelayMs: number;
  /** Entries dropped since the recorder started (also the metric). */
  dropped = 0;

  constructor(db: Database, options: RecorderOptions = {}) {
    this.maxBufferedBytes = options.maxBufferedBytes ?? MAX_BUFFERED_BYTES;
    this.flushDelayMs = options.flushDelayMs ?? FLUSH_DELAY_MS;
    this.onWriteError = options.onWriteError;
    this.batcher = new Batcher(db, {
      transaction: false,
      maxSize: MAX_BATCH_ENTRIES,
      run: async (tx, entries) => {
        await insertRequestLogs(tx, entries);
        return entries.map(() => undefined);
      },
    });
  }

  /** Keeps an entry to be written soon, or drops it when the buffer is full. */
  record(entry: RequestLogEntry): void {
    const bytes = entryBytes(entry);
    if (this.bufferedBytes + bytes > this.maxBufferedBytes) {
      this.dropped += 1;
      requestLogDropped.inc({ reason: 'buffer_full' });
      return;
    }
    this.buffered.push(entry);
    this.bufferedBytes += bytes;
    if (this.buffered.length >= MAX_BATCH_ENTRIES) this.startWriting();
    else this.timer ??= setTimeout(() => this.startWriting(), this.flushDelayMs).unref();
  }

  /** Writes every entry recorded so far; resolves when they are written (or dropped). */
  async flush(): Promise<void> {
    this.startWriting();
    await Promise.all([...this.writing]);
  }

  private startWriting(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const entries = this.buffered;
    this.buffered = [];
    for (const entry of entries) {
      // Added in one turn of the event loop: the batcher writes them together.
      const written: Promise<void> = this.batcher
        .add(entry)
        .catch((error: unknown) => {
          this.dropped += 1;
          requestLogDropped.inc({ reason: 'write_failed' });
          this.onWriteError?.(error);
        })
        .finally(() => {
          this.bufferedBytes -= entryBytes(entry);
          this.writing.delete(written);
        });
      this.writing.add(written);
    }
  }
}

function entryBytes(entry: RequestLogEntry): number {
  // Bodies are already cut to MAX_BODY_BYTES; their JSON length is what they hold in memory, roughly.
  return ENTRY_OVERHEAD_BYTES + jsonLength(entry.requestBody) + jsonLength(entry.responseBody);
}

const sizes = new WeakMap<object, number>();
function jsonLength(body: Record<string, unknown> | null): number {
  if (body === null) return 0;
  let size = sizes.get(body);
  if (size === undefined) {
    size = JSON.stringify(body).length;
    sizes.set(body, size);
  }
  return size;
}

/** Which requests are recorded: made with an API key (not a session: the dashboard's own traffic). */
const recorded = (request: FastifyRequest) => request.principal?.kind === 'api_key' && request.method !== 'HEAD';

/**
 * Adds the hooks that record each API key's request: its body as it arrived (before defaults are
 * filled in by validation), its answer before serialization, and the entry once the answer is sent.
 * Register before the routes.
 */
export function installRequestLog(app: App): void {
  const recorder = new RequestLogRecorder(app.db, {
    onWriteError: (error) => app.log.warn({ err: error }, 'request log: an entry could not be written'),
  });
  app.decorate('requestLog', recorder);
  const requestBodies = new WeakMap<FastifyRequest, Record<string, unknown> | null>();
  const responseBodies = new WeakMap<FastifyRequest, Record<string, unknown> | null>();

  app.addHook('preValidation', async (request) => {
    if (recorded(request)) requestBodies.set(request, loggedBody(request.body));
  });
  app.addHook('preSerialization', async (request, _reply, payload) => {
    if (recorded(request)) responseBodies.set(request, loggedBody(payload));
    return payload;
  });
  app.addHook('onResponse', async (request, reply) => {
    if (!recorded(request)) return;
    const { principal } = request;
    if (principal.kind !== 'api_key') return;
    const durationMs = Math.round(reply.elapsedTime);
    recorder.record({
      id: newRowId(),
      organizationId: principal.organizationId,
      apiKeyId: principal.apiKeyId,
      method: request.method,
      endpoint: request.url,
      status: reply.statusCode,
      durationMs,
      userAgent: request.headers['user-agent'] ?? null,
      // A request refused before validation (its key, an unstorable character) has its body as parsed.
      requestBody: requestBodies.has(request) ? requestBodies.get(request)! : loggedBody(request.body),
      responseBody: responseBodies.get(request) ?? null,
      createdAt: new Date(recorder.now().getTime() - durationMs),
    });
  });
  app.addHook('onClose', () => recorder.flush());
}
