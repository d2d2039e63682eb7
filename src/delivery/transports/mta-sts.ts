import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import type { Resolver } from 'node:dns/promises';
import { request, type Dispatcher } from 'undici';
import type { Config } from '../../platform/config.ts';
import type { Queryable } from '../../platform/db/database.ts';
import { createSafeDispatcher } from '../../webhooks/safe-dispatcher.ts';

// MTA-STS (RFC 8461): a recipient domain that publishes `_mta-sts.<domain>` TXT (`v=STSv1; id=…`) and a
// policy at https://mta-sts.<domain>/.well-known/mta-sts.txt says which MX hosts may receive its mail,
// and whether senders must use TLS with a certificate valid for them (`enforce`) or only report when they
// could not (`testing`). The policy is fetched over HTTPS (its certificate checked, no redirects, at most
// 64 KiB) and cached for its max_age, in the database so that a restart keeps it: a cached policy stands
// while the TXT record's id is unchanged, and even while the TXT record or the fetch fails, so that an
// attacker who strips them cannot turn TLS off. Operators may also require TLS for domains of their own.

export interface MtaStsPolicy {
  /** The TXT record's id the policy was fetched for. */
  id: string;
  mode: 'enforce' | 'testing' | 'none';
  /** MX host patterns: `mx.example.com` or `*.example.net` (one leftmost label). */
  mx: string[];
  maxAgeSeconds: number;
  fetchedAt: Date;
}

/** How a domain's mail must travel. */
export type TlsRule =
  | { kind: 'opportunistic' }
  | { kind: 'mta-sts'; policy: MtaStsPolicy }
  /** The operator's MAILROOM_TLS_REQUIRED_DOMAINS: TLS with a certificate valid for the MX host. */
  | { kind: 'required' };

/** RFC 8461 §3.2: max_age up to 31557600 seconds (a year). */
const MAX_AGE_LIMIT = 31_557_600;
const POLICY_BYTES_LIMIT = 64 * 1024;
/**
 * How long a domain's answer (its policy, or that it has none) is kept in memory before the TXT record
 * is looked up again: deliveries to a domain do not each cost a DNS query and a database read, and a new
 * policy id is seen within this.
 */
export const RECHECK_MS = 5 * 60_000;
/** Domains whose answer is kept at most: the oldest answer goes first. */
const MAX_ANSWERS = 10_000;
const FETCH_TIMEOUT_MS = 10_000;

/** The policy in a policy file's text, or why it is not one. */
export function parsePolicy(text: string, id: string, fetchedAt: Date): MtaStsPolicy | { invalid: string } {
  const fields = new Map<string, string[]>();
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) return { invalid: `not a "key: value" line: ${JSON.stringify(line.slice(0, 80))}` };
    const key = line.slice(0, colon).trim();
    fields.set(key, [...(fields.get(key) ?? []), line.slice(colon + 1).trim()]);
  }
  if (fields.get('version')?.[0] !== 'STSv1') return { invalid: 'version is not STSv1' };
  const mode = fields.get('mode')?.[0];
  if (mode !== 'enforce' && mode !== 'testing' && mode !== 'none') {
    return { invalid: `mode is ${JSON.stringify(mode ?? null)}, not enforce, testing or none` };
  }
  const maxAge = Number(fields.get('max_age')?.[0]);
  if (!Number.isSafeInteger(maxAge) || maxAge < 0 || maxAge > MAX_AGE_LIMIT) {
    return { invalid: 'max_age is not a whole number of seconds up to 31557600' };
  }
  const mx = (fields.get('mx') ?? []).map((pattern) => pattern.toLowerCase().replace(/\.$/, ''));
  if (mode !== 'none' && mx.length === 0) return { invalid: `mode ${mode} names no mx` };
  return { id, mode, mx, maxAgeSeconds: maxAge, fetchedAt };
}

/** Whether an MX host name matches a policy pattern (RFC 8461 §4.1: `*.` stands for one leftmost label). */
export function mxMatches(pattern: string, host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  if (pattern.startsWith('*.')) {
    const rest = pattern.slice(1); // ".example.net"
    return name.endsWith(rest) && !name.slice(0, -rest.length).includes('.') && name.length > rest.length;
  }
  return name === pattern;
}

/** The `id` of the domain's one `v=STSv1` TXT record; undefined when there is none (or several). */
export function stsRecordId(records: string[][]): string | undefined {
  const sts = records.map((chunks) => chunks.join('')).filter((record) => /^v=STSv1\s*(;|$)/.test(record));
  if (sts.length !== 1) return undefined;
  const id = /(?:^|;)\s*id=([A-Za-z0-9]{1,32})\s*(;|$)/.exec(sts[0]!)?.[1];
  return id;
}

export interface MtaSts {
  /** What the domain's mail must meet now: an MTA-STS policy, the operator's requirement, or nothing. */
  ruleFor(domain: string): Promise<TlsRule>;
  /** PEM certificates a certificate is checked against: the system's and MAILROOM_EXTRA_CA_FILE's. */
  readonly ca: string[];
  close(): Promise<void>;
}

export interface MtaStsOptions {
  resolver: Resolver;
  db: Queryable;
  now?: () => Date;
  /** Fetches a policy file (tests count fetches); default: HTTPS GET on MAILROOM_MTA_STS_PORT. */
  fetchPolicy?: (domain: string) => Promise<string>;
  log?: { warn(details: object, message: string): void };
}

export function createMtaSts(config: Config, options: MtaStsOptions): MtaSts {
  const now = options.now ?? (() => new Date());
  const extra = config.extraCaFile === undefined ? [] : [readFileSync(config.extraCaFile, 'utf8')];
  const ca = [...rootCertificates, ...extra];
  const required = new Set(config.tlsRequiredDomains);
  let dispatcher: Dispatcher | undefined;
  const memory = new Map<string, MtaStsPolicy>();

  const fetchPolicy =
    options.fetchPolicy ??
    (async (domain: string) => {
      // The policy host is the recipient domain's to point anywhere: the addresses a recipient's MX may
      // use are the only ones fetched from (MAILROOM_MX_ALLOW_CIDRS), as for webhooks.
      dispatcher ??= createSafeDispatcher(
        { ...config, webhookAllowCidrs: config.mxAllowCidrs, webhookTimeoutMs: FETCH_TIMEOUT_MS },
        { connectionsPerOrigin: 1, ca },
      );
      const port = config.mtaStsPort === 443 ? '' : `:${config.mtaStsPort}`;
      const response = await request(`https://mta-sts.${domain}${port}/.well-known/mta-sts.txt`, {
        dispatcher,
        method: 'GET',
        signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > POLICY_BYTES_LIMIT) throw new Error(`the policy is over ${POLICY_BYTES_LIMIT} bytes`);
        chunks.push(chunk);
      }
      if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
      const type = String(response.headers['content-type'] ?? '');
      if (!/^text\/plain\b/i.test(type)) throw new Error(`content-type is ${type || 'missing'}, not text/plain`);
      return Buffer.concat(chunks).toString('utf8');
    });

  const stored = async (domain: string): Promise<MtaStsPolicy | undefined> => {
    // A copy in memory that ran out may have been refreshed by another process: read the database then.
    const known = memory.get(domain);
    if (known && fresh(known)) return known;
    const { rows } = await options.db.query<{
      policy_id: string;
      mode: MtaStsPolicy['mode'];
      mx: string[];
      max_age: number;
      fetched_at: Date;
    }>('SELECT policy_id, mode, mx, max_age, fetched_at FROM mta_sts_policies WHERE domain = $1', [domain]);
    const row = rows[0];
    if (!row) return undefined;
    const policy = {
      id: row.policy_id,
      mode: row.mode,
      mx: row.mx,
      maxAgeSeconds: row.max_age,
      fetchedAt: row.fetched_at,
    };
    memory.set(domain, policy);
    return policy;
  };
  const keep = async (domain: string, policy: MtaStsPolicy) => {
    memory.set(domain, policy);
    await options.db.query(
      `INSERT INTO mta_sts_policies (domain, policy_id, mode, mx, max_age, fetched_at) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (domain) DO UPDATE SET policy_id = $2, mode = $3, mx = $4, max_age = $5, fetched_at = $6`,
      [domain, policy.id, policy.mode, policy.mx, policy.maxAgeSeconds, policy.fetchedAt],
    );
  };
  const dueForRefresh = (policy: MtaStsPolicy) =>
    now().getTime() - policy.fetchedAt.getTime() > Math.min(policy.maxAgeSeconds * 500, 86_400_000);
  const fresh = (policy: MtaStsPolicy | undefined) =>
    policy !== undefined && policy.fetchedAt.getTime() + policy.maxAgeSeconds * 1000 > now().getTime();

  /** The policy in force for the domain, fetched when its id changed or its cache ran out. */
  async function policyFor(domain: string): Promise<MtaStsPolicy | undefined> {
    const cached = await stored(domain);
    const valid = fresh(cached) ? cached : undefined;
    let id: string | undefined;
    try {
      id = stsRecordId(await options.resolver.resolveTxt(`_mta-sts.${domain}`));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // No such name or no TXT: no record. Anything else (a timeout) says nothing: the cache stands.
      if (code !== 'ENOTFOUND' && code !== 'ENODATA') return valid;
    }
    if (id === undefined) return valid;
    // The same id: the cached policy, refreshed ahead of its expiry (RFC 8461 §10.2) once half its
    // max_age has passed (at most a day), so that it never runs out between two deliveries.
    if (valid && valid.id === id && !dueForRefresh(valid)) return valid;
    try {
      const parsed = parsePolicy(await fetchPolicy(domain), id, now());
      if ('invalid' in parsed) throw new Error(parsed.invalid);
      await keep(domain, parsed);
      return parsed;
    } catch (error) {
      options.log?.warn(
        { err: error, domain },
        'the MTA-STS policy could not be fetched; the cached one (if any) stands',
      );
      return valid;
    }
  }

  const answers = new Map<string, { at: number; policy: MtaStsPolicy | undefined }>();
  /** The domain's policy as last looked up (within RECHECK_MS, and still within its max_age), or now. */
  const currentPolicy = async (name: string) => {
    const known = answers.get(name);
    const at = now().getTime();
    if (known && at - known.at < RECHECK_MS && (known.policy === undefined || fresh(known.policy))) return known.policy;
    const policy = await policyFor(name);
    answers.delete(name);
    if (answers.size >= MAX_ANSWERS) answers.delete(answers.keys().next().value!);
    answers.set(name, { at, policy });
    return policy;
  };

  return {
    ca,
    async ruleFor(domain) {
      const name = domain.toLowerCase();
      const policy = await currentPolicy(name);
      if (policy?.mode === 'enforce') return { kind: 'mta-sts', policy };
      // The operator's requirement is at least as strict as a policy in testing.
      if (required.has(name)) return { kind: 'required' };
      if (policy?.mode === 'testing') return { kind: 'mta-sts', policy };
      return { kind: 'opportunistic' };
    },
    async close() {
      await dispatcher?.close();
    },
  };
}
