import { readFileSync } from 'node:fs';
import { parse as parseToml } from 'smol-toml';
import {
  BUILT_IN_DEFAULT_LIMITS,
  BUILT_IN_HOLDS,
  BUILT_IN_SITE_LIMITS,
  formatDuration,
  type HoldKey,
  type SiteLimits,
} from './limits.ts';
import { normalizeSiteId, PROVIDER_MX_SUFFIXES, type MxSuffixes } from './sites.ts';
import { compileEgress, type Egress } from './egress.ts';
import {
  describe,
  duration,
  isTable,
  keyPath,
  LIMIT_KEYS,
  limitsTable,
  list,
  onlyKeys,
  ShapingFileError,
  table,
  text,
  type Table,
} from './file-values.ts';

export { ShapingFileError } from './file-values.ts';

// The shaping file (MAILROOM_SHAPING_FILE): limits per destination site over the built-in ones, rules
// that act on a reply's text, and hold durations. It is checked whole at start, so that a typo stops
// the process with the key at fault instead of being ignored while mail goes out unshaped. Its egress
// tables ([source], [pool], [routing], [warmup]) are read by egress.ts.

/** What a `[[rule]]` does while its duration runs, once a reply's text matches its regex. */
export type ShapingRule =
  | { name: string; regex: RegExp; action: 'pause'; scope: 'site' | 'sender'; durationMs: number }
  | { name: string; regex: RegExp; action: 'lower'; limits: Partial<SiteLimits>; durationMs: number };

export interface ShapingPolicy {
  /**
   * A site's limits: built-in default < built-in site < file [default] < file [site.<id>], and for a
   * relay source (whose site is `relay`) the limits in its own [source.<name>] table last.
   */
  limitsFor(site: string, source?: string): SiteLimits;
  /** Sources, pools and routing. */
  readonly egress: Egress;
  /** In the file's order; `name` is `rule[<index>]`. */
  readonly rules: readonly ShapingRule[];
  /** Milliseconds, by hold key. */
  readonly holds: Readonly<Record<HoldKey, number>>;
  /** Suffixes the file adds, by site id (the built-in ones are in PROVIDER_MX_SUFFIXES). */
  readonly mxSuffixes: MxSuffixes;
}

/** The policy in `path` (TOML, or JSON when the name ends in .json); undefined: the built-in one. */
export function loadShapingFile(path: string | undefined): ShapingPolicy {
  if (path === undefined) return compileShapingPolicy({});
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ShapingFileError(undefined, `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`, path);
  }
  const json = path.toLowerCase().endsWith('.json');
  let raw: unknown;
  try {
    raw = json ? JSON.parse(text) : parseToml(text, { unsafeKeyBehaviour: 'throw' });
  } catch (error) {
    // The parser quotes the line at fault, which may be a relay source's URL with its password.
    const message = (error as Error).message.replace(/\/\/[^\s/@"']*@/g, '//…@');
    throw new ShapingFileError(undefined, `not valid ${json ? 'JSON' : 'TOML'}: ${message}`, path);
  }
  try {
    return compileShapingPolicy(raw);
  } catch (error) {
    if (error instanceof ShapingFileError) throw new ShapingFileError(error.keyPath, error.problem, path);
    throw error;
  }
}

/** Checks a parsed file (a TOML document or JSON value) and compiles it. */
export function compileShapingPolicy(raw: unknown): ShapingPolicy {
  if (!isTable(raw))
    throw new ShapingFileError(
      undefined,
      'expected a table of [default], [site.<id>], [[rule]], [holds], [source.<name>]',
    );
  onlyKeys(raw, ['default', 'site', 'rule', 'holds', 'source', 'pool', 'routing', 'warmup'], '');

  const fileDefault = raw.default === undefined ? {} : limitsTable(table(raw.default, 'default'), 'default');

  const fileSites = new Map<string, Partial<SiteLimits>>();
  const mxSuffixes: Record<string, string[]> = {};
  const suffixOwner = new Map<string, string>(); // suffix -> site, to refuse one suffix for two sites
  for (const [site, suffixes] of Object.entries(PROVIDER_MX_SUFFIXES))
    for (const s of suffixes) suffixOwner.set(s, site);
  const fileSiteKeys = new Map<string, string>(); // normalized id -> the key it was written as
  for (const [key, value] of Object.entries(raw.site === undefined ? {} : table(raw.site, 'site'))) {
    const path = keyPath('site', key);
    const siteTable = table(value, path);
    const id = siteIdOf(key, siteTable, path);
    const earlier = fileSiteKeys.get(id);
    if (earlier !== undefined) throw new ShapingFileError(path, `the same site as ${keyPath('site', earlier)}`);
    fileSiteKeys.set(id, key);
    fileSites.set(id, limitsTable(siteTable, path, ['mx_suffixes']));
    if (siteTable.mx_suffixes !== undefined) {
      mxSuffixes[id] = suffixList(siteTable.mx_suffixes, `${path}.mx_suffixes`, id, suffixOwner);
    }
  }

  const rules = raw.rule === undefined ? [] : list(raw.rule, 'rule').map((entry, at) => rule(entry, `rule[${at}]`));
  const holds = holdsTable(raw.holds);
  // A site named by the egress tables is one a [site.<id>] key could name (or one the file names).
  const egress = compileEgress(raw, (id) => {
    if (fileSites.has(id) || id === 'relay' || id.startsWith('mx:')) return true;
    if (Object.hasOwn(PROVIDER_MX_SUFFIXES, id)) return true;
    return /^[a-z0-9.-]+\.[a-z0-9-]+$/.test(id);
  });

  return {
    limitsFor(site: string, source?: string): SiteLimits {
      const id = normalizeSiteId(site);
      const builtIn = Object.hasOwn(BUILT_IN_SITE_LIMITS, id) ? BUILT_IN_SITE_LIMITS[id] : {};
      const relay = source === undefined ? undefined : egress.sources.get(source);
      const own = relay?.kind === 'relay' ? relay.limits : {};
      return { ...BUILT_IN_DEFAULT_LIMITS, ...builtIn, ...fileDefault, ...fileSites.get(id), ...own };
    },
    egress,
    rules,
    holds,
    mxSuffixes,
  };
}

/**
 * A `[site.<key>]` table's site id. Accepted: a built-in provider, `relay` (the smtp transport's
 * relay), `mx:<host>,<host>`, a domain (the site of a domain without MX), or a new provider id given
 * with its `mx_suffixes`. Anything else would be a site no mail ever goes to, most likely a typo.
 */
function siteIdOf(key: string, value: Table, path: string): string {
  if (key === 'relay') {
    if (value.mx_suffixes !== undefined) throw new ShapingFileError(`${path}.mx_suffixes`, 'the relay has no MX');
    return key;
  }
  if (Object.hasOwn(PROVIDER_MX_SUFFIXES, key)) return key;
  if (key.startsWith('mx:')) {
    const id = normalizeSiteId(key);
    if (id === 'mx:') throw new ShapingFileError(path, 'expected "mx:" followed by MX host names joined by ","');
    return id;
  }
  if (/^[a-z][a-z0-9_-]*$/.test(key) && key !== 'default' && value.mx_suffixes !== undefined) return key;
  if (/^[a-z0-9.-]+\.[a-z0-9-]+\.?$/i.test(key)) return normalizeSiteId(key);
  throw new ShapingFileError(
    path,
    `not a known site: expected a provider (${Object.keys(PROVIDER_MX_SUFFIXES).join(', ')}), relay, ` +
      '"mx:<hosts>", a domain, or a new provider id (lower case) with its mx_suffixes',
  );
}

function suffixList(value: unknown, path: string, site: string, owner: Map<string, string>): string[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new ShapingFileError(path, `expected a non-empty array of suffixes, got ${describe(value)}`);
  }
  return value.map((item, at) => {
    const suffix = typeof item === 'string' ? item.trim().toLowerCase() : '';
    if (!/^(\.[a-z0-9-]+)+$/.test(suffix)) {
      throw new ShapingFileError(
        `${path}[${at}]`,
        `expected a host name suffix starting with a dot, e.g. ".mx.example.net", got ${describe(item)}`,
      );
    }
    const taken = owner.get(suffix);
    if (taken !== undefined && taken !== site) {
      throw new ShapingFileError(`${path}[${at}]`, `"${suffix}" is already a suffix of site ${taken}`);
    }
    owner.set(suffix, site);
    return suffix;
  });
}

function rule(value: unknown, path: string): ShapingRule {
  const entry = table(value, path);
  for (const key of ['regex', 'action', 'duration']) {
    if (entry[key] === undefined) throw new ShapingFileError(`${path}.${key}`, 'required');
  }
  const action = entry.action;
  if (action !== 'pause' && action !== 'lower') {
    throw new ShapingFileError(`${path}.action`, `expected "pause" or "lower", got ${describe(action)}`);
  }
  if (action === 'pause') onlyKeys(entry, ['regex', 'action', 'duration', 'scope'], path);
  else onlyKeys(entry, ['regex', 'action', 'duration', ...LIMIT_KEYS], path);
  const source = text(entry.regex, `${path}.regex`);
  let regex: RegExp;
  try {
    regex = new RegExp(source);
  } catch (error) {
    throw new ShapingFileError(`${path}.regex`, `not a valid regular expression: ${(error as Error).message}`);
  }
  const durationMs = duration(entry.duration, `${path}.duration`);
  const name = path;
  if (action === 'pause') {
    const scope = entry.scope ?? 'site';
    if (scope !== 'site' && scope !== 'sender') {
      throw new ShapingFileError(`${path}.scope`, `expected "site" or "sender", got ${describe(scope)}`);
    }
    return { name, regex, action, scope, durationMs };
  }
  const limits = limitsTable(entry, path, ['regex', 'action', 'duration']);
  if (Object.keys(limits).length === 0) {
    throw new ShapingFileError(path, `a "lower" rule sets at least one of ${LIMIT_KEYS.join(', ')}`);
  }
  return { name, regex, action, limits, durationMs };
}

function holdsTable(value: unknown): Record<HoldKey, number> {
  const holds: Record<HoldKey, number> = { ...BUILT_IN_HOLDS };
  if (value === undefined) return holds;
  const given = table(value, 'holds');
  const keys = Object.keys(BUILT_IN_HOLDS) as HoldKey[];
  onlyKeys(given, keys, 'holds');
  for (const key of keys) if (given[key] !== undefined) holds[key] = duration(given[key], `holds.${key}`);
  for (const key of keys) {
    if (holds[key] > holds.max) {
      const at = given[key] !== undefined ? `holds.${key}` : 'holds.max';
      throw new ShapingFileError(
        at,
        `holds.${key} (${formatDuration(holds[key])}) is longer than holds.max (${formatDuration(holds.max)}), the longest any hold grows to`,
      );
    }
  }
  return holds;
}
