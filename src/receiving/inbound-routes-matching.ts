import { addressKey } from '../platform/address-key.ts';
import type { InboundRouteRow, RecipientKind } from './inbound-routes-model.ts';
import { compilePattern, testPattern } from './route-patterns.ts';

// Matching an inbound route: its recipient and header patterns compiled once per walk into tests of an
// address and of a message's headers (routes.ts walks the routes with them).

/** A route ready to be tried: its patterns compiled once per walk. */
export interface CompiledRoute {
  row: Pick<InboundRouteRow, 'id' | 'recipient_kind' | 'recipient_pattern' | 'actions' | 'stop'> &
    Partial<Pick<InboundRouteRow, 'header_name' | 'header_pattern'>>;
  recipient(address: string): boolean;
  header(headers: Record<string, string>): boolean;
}

export function compileRoute(row: CompiledRoute['row']): CompiledRoute {
  return {
    row,
    recipient: recipientMatcher(row.recipient_kind, row.recipient_pattern),
    header: headerMatcher(row.header_name ?? null, row.header_pattern ?? null),
  };
}

/** The tag of an address: what follows the first '+' of the part before @ (none: undefined). */
export function plusTag(address: string): string | undefined {
  const local = address.slice(0, address.lastIndexOf('@'));
  const plus = local.indexOf('+');
  return plus < 0 ? undefined : local.slice(plus + 1);
}

function recipientMatcher(kind: RecipientKind, pattern: string): (address: string) => boolean {
  switch (kind) {
    case 'exact': {
      const key = addressKey(pattern);
      return (address) => addressKey(address) === key;
    }
    case 'domain': {
      const domain = addressKey(`x${pattern.slice(1)}`).slice(2);
      return (address) => addressKey(address).endsWith(`@${domain}`);
    }
    case 'plus_tag': {
      const tag = pattern.slice(1).toLowerCase();
      return (address) => plusTag(address)?.toLowerCase() === tag;
    }
    case 'regex': {
      // Stored patterns were checked when written; one that no longer compiles matches nothing.
      let compiled: RegExp | undefined;
      try {
        compiled = compilePattern(pattern, 'match.recipient', true);
      } catch {
        return () => false;
      }
      return (address) => testPattern(compiled, address);
    }
    case 'catch_all':
      return () => true;
  }
}

function headerMatcher(name: string | null, pattern: string | null): (headers: Record<string, string>) => boolean {
  if (name === null || pattern === null) return () => true;
  let compiled: RegExp;
  try {
    compiled = compilePattern(pattern, 'match.header.pattern', false);
  } catch {
    return () => false;
  }
  return (headers) => {
    const value = headerValue(headers, name);
    return value !== undefined && testPattern(compiled, value);
  };
}

/** A header's value from a flat map whose names may be in any case. */
function headerValue(headers: Record<string, string>, name: string): string | undefined {
  // Own properties only: a route on a header named `constructor` or `__proto__` must not find Object's.
  if (Object.hasOwn(headers, name)) return headers[name];
  const lower = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === lower) return value;
  return undefined;
}
