import type { Resolver } from 'node:dns/promises';
import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import type { Egress } from '../shaping/egress.ts';

// What every check of the doctor shares: a finding and its status, the domain checked, the context the
// checks run in (database, settings, egress sources, DNS resolver, clock), and the DNS look-up of TXT
// records that tells a missing record from a failed look-up.

export type FindingStatus = 'pass' | 'warn' | 'fail';

export interface Finding {
  /** dkim, dmarc, spf, ptr, blocklist, return_path_mx, receiving_mx, complaint_rate, unsubscribe, authentication. */
  check: string;
  /** What was checked: the domain, a source (`source mta1 (192.0.2.10)`), a blocklist … */
  subject: string;
  status: FindingStatus;
  /** What was found. */
  summary: string;
  /** The fix to make; null when nothing is to be done. */
  fix: string | null;
}

export interface DomainHealth {
  object: 'domain_health';
  domain_id: string;
  domain: string;
  /** The worst finding's status. */
  status: FindingStatus;
  checked_at: string;
  findings: Finding[];
}

export interface DoctorContext {
  db: Database;
  config: Pick<Config, 'returnPathDomain' | 'mxPort' | 'heloName' | 'dnsblZones' | 'smtpTimeoutMs'>;
  egress: Egress;
  resolver: Resolver;
  now?: () => Date;
  log?: { error(details: object, message: string): void };
}

export interface DomainRow {
  id: string;
  organization_id: string;
  name: string;
  dkim_selector: string;
  dkim_public_key: string;
  /** The domain's own return-path label (send → send.example.com); null: MAILROOM_RETURN_PATH_DOMAIN. */
  custom_return_path: string | null;
  /** Whether the domain receives mail: its own MX must then reach the inbound listener. */
  receiving: boolean;
}

/** Adds a finding to those of the domain being examined. */
export type AddFinding = (
  check: string,
  subject: string,
  status: FindingStatus,
  summary: string,
  fix?: string | null,
) => void;

const RANK: Record<FindingStatus, number> = { pass: 0, warn: 1, fail: 2 };
/** The fix of a finding whose look-up failed: it says nothing new about the domain. */
export const CHECK_AGAIN = 'Check again later.';
export const worst = (findings: Finding[]): FindingStatus =>
  findings.reduce<FindingStatus>((w, f) => (RANK[f.status] > RANK[w] ? f.status : w), 'pass');

/** The TXT records at `name`, each joined from its chunks; [] when there are none, 'failed' when unknown. */
export async function txtRecords(resolver: Resolver, name: string): Promise<string[] | 'failed'> {
  try {
    return (await resolver.resolveTxt(name)).map((chunks) => chunks.join(''));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOTFOUND' || code === 'ENODATA' ? [] : 'failed';
  }
}

/**
 * The return-path domain of the domain's mail: the domain's own (send.example.com) or the server's
 * (MAILROOM_RETURN_PATH_DOMAIN); undefined without either. Every copy's MAIL FROM is there.
 */
export function returnPathDomainOf(ctx: DoctorContext, domain: DomainRow): string | undefined {
  return domain.custom_return_path === null
    ? ctx.config.returnPathDomain
    : `${domain.custom_return_path}.${domain.name}`;
}
