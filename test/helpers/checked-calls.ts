import assert from 'node:assert/strict';
import { responseProblems } from './resend-openapi.ts';

// Requests over real HTTP to a listening app whose every answer is checked against Resend's schema for
// the operation (when Resend has one), and the shape of a refusal in the error envelope.

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers, read field by field
export type CheckedAnswer = { status: number; body: any };

/** `call(method, path, body?, key?)` against `base()`, with `defaultKey()` as the bearer unless given. */
export function checkedCaller(base: () => string, defaultKey: () => string) {
  return async function call(method: string, path: string, body?: unknown, key = defaultKey()): Promise<CheckedAnswer> {
    const res = await fetch(base() + path, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const answer = { status: res.status, body: text ? JSON.parse(text) : undefined };
    assert.deepEqual(
      responseProblems(method, path, answer.status, answer.body) ?? [],
      [],
      `${method} ${path}: ${text}`,
    );
    return answer;
  };
}

/** The answer is the envelope of a refusal: this status, error name and field (none when undefined). */
export function assertRefused(
  answer: { status: number; body: { name?: string; field?: string; statusCode?: number } },
  status: number,
  name: string,
  field?: string,
): void {
  assert.equal(answer.status, status, JSON.stringify(answer.body));
  assert.equal(answer.body.statusCode, status);
  assert.equal(answer.body.name, name, JSON.stringify(answer.body));
  assert.equal(answer.body.field, field, JSON.stringify(answer.body));
}
