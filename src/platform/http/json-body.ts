import { ServiceError } from '../errors.ts';

/**
 * How deep a JSON body may nest: 64 levels of arrays and objects. Every body of the API is a few levels
 * deep (a batch entry's attachment is four); a deeper one is refused where it is parsed, so that no walk
 * over a body (validation, fingerprints, storage) ever meets a value nested thousands of levels down.
 */
export const MAX_JSON_DEPTH = 64;

/** The number of nested levels of arrays and objects in a parsed JSON value, counting stops past `limit`. */
export function jsonDepth(value: unknown, limit: number = MAX_JSON_DEPTH): number {
  let deepest = 0;
  // An explicit stack: the value may be nested deeper than the call stack allows.
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const { value: item, depth } = next;
    if (item === null || typeof item !== 'object') continue;
    const level = depth + 1;
    if (level > deepest) deepest = level;
    if (deepest > limit) return deepest;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      if (child !== null && typeof child === 'object') stack.push({ value: child, depth: level });
    }
  }
  return deepest;
}

/** Throws 400 `validation_error` when the parsed body nests deeper than MAX_JSON_DEPTH. */
export function checkJsonDepth(value: unknown): void {
  if (jsonDepth(value) > MAX_JSON_DEPTH) {
    throw new ServiceError(
      'validation_error',
      `The JSON body is nested more than ${MAX_JSON_DEPTH} levels deep (arrays and objects)`,
    );
  }
}
