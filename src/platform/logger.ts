// What background parts (workers, listeners) need of a logger: structured fields first, then the
// message, as pino (Fastify's logger) takes them. The process's one logger is passed down from
// src/server.ts; tests pass a silent one.

type LogFunction = (fields: Record<string, unknown>, message?: string) => void;

export interface Logger {
  info: LogFunction;
  warn: LogFunction;
  error: LogFunction;
}
