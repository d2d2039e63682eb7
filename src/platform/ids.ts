const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether a path or body value can be an id at all: anything else names nothing (404) without a query. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}
