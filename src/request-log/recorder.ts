import { Counter } from 'prom-client';
import type { FastifyRequest } from 'fastify';
import type { App } from '../platform/http/app-types.ts';
import type { Database } from '../platform/db/database.ts';
import { worthWritingAlone } from '../platform/db/batcher.ts';
import { registry } from '../platform/metrics.ts';
import { newRowId } from '../platform/ids.ts';
import { loggedBodyText } from './redact.ts';
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
  interface FastifyRequest {
    /** The request's body as its log entry keeps it (JSON text), once validation is reached. */
    loggedRequestBody: string | null | undefined;
    /** The answer's body as its log entry keeps it (JSON text), once it is serialized. */
    loggedResponseBody: string | null | undefined;
  }
}

interface RecorderOptions {
  maxBufferedBytes?: number;
  flushDelayMs?: number;
  onWriteError?: (error: unknown) => void;
}

export class RequestLogRecorder {
  private readonly db: Database;
  private buffered: RequestLogEntry[] = [];
  private bufferedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly writing = new Set<Promise<void>>();
  /** The write started last: the next starts when it is done, whichever way. */
  private lastWrite: Promise<void> = Promise.resolve();
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
    this.db = db;
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
    // One statement per MAX_BATCH_ENTRIES, one at a time: the log never holds more than one of the
    // pool's connections, however far the database falls behind (the buffer's bound drops the rest).
    for (let start = 0; start < entries.length; start += MAX_BATCH_ENTRIES) {
      const chunk = entries.slice(start, start + MAX_BATCH_ENTRIES);
      const bytes = chunk.reduce((sum, entry) => sum + entryBytes(entry), 0);
      const run = () => this.write(chunk);
      const written: Promise<void> = this.lastWrite.then(run, run).finally(() => {
        this.bufferedBytes -= bytes;
        this.writing.delete(written);
      });
      this.lastWrite = written;
      this.writing.add(written);
    }
  }

  /**
   * Writes entries with one statement. One entry must not fail its neighbours: when the statement
   * fails, each is written again alone, so only the one at fault is dropped (not when the connection
   * was lost or the statement waited too long: each alone would fail the same way).
   */
  private async write(entries: RequestLogEntry[]): Promise<void> {
    try {
      await insertRequestLogs(this.db, entries);
    } catch (error) {
      if (entries.length > 1 && worthWritingAlone(error)) {
        for (const entry of entries) await this.write([entry]);
        return;
      }
      this.dropped += entries.length;
      requestLogDropped.inc({ reason: 'write_failed' }, entries.length);
      this.onWriteError?.(error);
    }
  }
}

function entryBytes(entry: RequestLogEntry): number {
  // Bodies are already cut to MAX_BODY_BYTES; their JSON text is about what they hold in memory.
  return ENTRY_OVERHEAD_BYTES + (entry.requestBody?.length ?? 0) + (entry.responseBody?.length ?? 0);
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
  // The bodies as logged, kept on the request between its hooks (undefined: not taken yet). Callback
  // hooks: they run for every request of an API key, and an async hook costs a promise each.
  app.decorateRequest('loggedRequestBody', undefined);
  app.decorateRequest('loggedResponseBody', undefined);

  app.addHook('preValidation', (request, _reply, done) => {
    if (recorded(request)) request.loggedRequestBody = loggedBodyText(request.body);
    done();
  });
  app.addHook('preSerialization', (request, _reply, payload, done) => {
    if (recorded(request)) request.loggedResponseBody = loggedBodyText(payload);
    done(null, payload);
  });
  app.addHook('onResponse', (request, reply, done) => {
    const { principal } = request;
    if (recorded(request) && principal.kind === 'api_key') {
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
        requestBody: request.loggedRequestBody ?? loggedBodyText(request.body),
        responseBody: request.loggedResponseBody ?? null,
        createdAt: new Date(recorder.now().getTime() - durationMs),
      });
    }
    done();
  });
  app.addHook('onClose', () => recorder.flush());
}
