import type { Queryable } from '../platform/db/database.ts';
import { notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { normalizeDomainName } from '../platform/domain-name.ts';
import { domainEventDataSql } from '../webhooks/event-payloads.ts';
import type { EventType } from '../webhooks/event-types.ts';
import {
  recordsToPublish,
  type RecordHosts,
  type RecordKind,
  type RecordStatus,
  type RecordStatuses,
  type RecordType,
} from './domain-records.ts';
import {
  domainCapabilities,
  type DomainCapabilities,
  type DomainRegion,
  type DomainSettings,
  type DomainTls,
} from './domain-options.ts';
import { whyNotPublicHost } from './public-host.ts';

// A domain as stored and as the API shows it (Resend's Domain object, with Mailroom's own fields added),
// and the reads every domain statement shares: its columns, a domain by id, its webhook event.

export type DomainStatus = 'pending' | 'verified';

/** A domain as stored, without its private key (only findSendingDomain reads that). */
export interface Domain {
  id: string;
  organization_id: string;
  name: string;
  status: DomainStatus;
  /** Verified on the operator's word (domain verify --trust), DKIM not yet found in DNS. */
  trusted: boolean;
  dkim_selector: string;
  dkim_public_key: string;
  record_status: RecordStatuses;
  verified_at: Date | null;
  last_checked_at: Date | null;
  created_at: Date;
  /** The domain's own tracking switches; null follows the organization. */
  open_tracking: boolean | null;
  click_tracking: boolean | null;
  /** The switches in force for messages sent from the domain: the domain's, else the organization's. */
  effective_open_tracking: boolean;
  effective_click_tracking: boolean;
  /** Resend's option (a label under the name); null: the server's return path and public URL. */
  custom_return_path: string | null;
  tracking_subdomain: string | null;
  tls: DomainTls;
  region: DomainRegion;
  /** Whether the inbound listener takes mail for the domain's addresses. */
  receiving: boolean;
  /** Mailroom's own: its messages carry a signed reply address as Reply-To (emails/reply-address.ts). */
  reply_tracking: boolean;
}

/** Something about the domain's records its owner should know before publishing them. */
export interface DomainWarning {
  /** Where, as a path in the domain object: `records[1].value`, `additional_records[0].value`. */
  field: string;
  message: string;
}

/**
 * The API shape, Resend's. `records` holds the kinds Resend's records have (DKIM, SPF);
 * `additional_records` the ones it has no kind for (DMARC), recommended all the same.
 */
export interface DomainView {
  object: 'domain';
  id: string;
  name: string;
  status: DomainStatus;
  /**
   * Mailroom's own: how a verified domain was verified. 'dns': its DKIM record was found; 'trusted': on
   * the operator's word, without DNS checks (`domain verify --trust`); null while pending.
   */
  verification: 'dns' | 'trusted' | null;
  created_at: string;
  /** As given when the domain was added (Resend's default, us-east-1, otherwise); sending ignores it. */
  region: DomainRegion;
  capabilities: DomainCapabilities;
  /** In force for the domain's messages: the domain's own switch, else the organization's. */
  open_tracking: boolean;
  click_tracking: boolean;
  /** Resend's option, which Resend's Domain object does not show: read back so that it can be checked. */
  tls: DomainTls;
  /** The label tracking links use (links → links.example.com); left out when the domain has none. */
  tracking_subdomain?: string;
  /** Mailroom's own: its messages carry a signed reply address as Reply-To, unless a send says otherwise. */
  reply_tracking: boolean;
  records: DomainRecordView[];
  additional_records: DomainRecordView[];
  /** Mailroom's own: record values that cannot work as they are (a host that is not a public name). */
  warnings: DomainWarning[];
}

/**
 * A change of a domain's settings (Resend's options, domain-options.ts). A tracking switch or tls left
 * out stays as it is; a tracking switch set to null follows the organization again.
 */
export type DomainChanges = DomainSettings;

/** Record kinds Resend's domain records have; the others go to additional_records. */
const RESEND_RECORD_KINDS: ReadonlySet<RecordKind> = new Set(['DKIM', 'SPF', 'Tracking', 'Receiving']);

export interface DomainRecordView {
  record: RecordKind;
  name: string;
  type: RecordType;
  ttl: 'Auto';
  status: RecordStatus;
  value: string;
  /** MX records only, as Resend. */
  priority?: number;
  required: boolean;
}

/** A switch in force: the domain's own, else its organization's (valid in RETURNING too). */
const effective = (column: 'open_tracking' | 'click_tracking') =>
  `coalesce(domains.${column}, (SELECT o.${column} FROM organizations o WHERE o.id = domains.organization_id))`;

export const COLUMNS = `id, organization_id, name, status, trusted, dkim_selector, dkim_public_key, record_status,
  verified_at, last_checked_at, created_at, open_tracking, click_tracking,
  ${effective('open_tracking')} AS effective_open_tracking, ${effective('click_tracking')} AS effective_click_tracking,
  tls, region, custom_return_path, tracking_subdomain, receiving, reply_tracking`;

/** A domain.* webhook event for the changed row (its data: webhooks/event-payloads.ts). */
export const domainEvent = (org: string, type: EventType) => ({
  org,
  type: `'${type}'::text`,
  data: domainEventDataSql('changed'),
});

export async function requireDomain(db: Queryable, organizationId: string, id: string): Promise<Domain> {
  if (!isUuid(id)) throw notFound('Domain');
  const { rows } = await db.query<Domain>(`SELECT ${COLUMNS} FROM domains WHERE id = $1 AND organization_id = $2`, [
    id,
    organizationId,
  ]);
  if (!rows[0]) throw notFound('Domain');
  return rows[0];
}

/** A domain name as stored, or undefined for one that cannot be (nothing is stored under it). */
export function normalizedOrUndefined(name: string): string | undefined {
  try {
    return normalizeDomainName(name);
  } catch {
    return undefined;
  }
}

export const keysOf = (domain: Domain) => ({
  name: domain.name,
  dkimSelector: domain.dkim_selector,
  dkimPublicKey: domain.dkim_public_key,
  customReturnPath: domain.custom_return_path,
  trackingSubdomain: domain.tracking_subdomain,
  receiving: domain.receiving,
});

/** The setting that moves the host a record of this type points at. */
const SETTING_OF: Partial<Record<RecordType, string>> = { MX: 'MAILROOM_MX_HOST', CNAME: 'MAILROOM_PUBLIC_URL' };

/** A warning for each MX or CNAME value that is not a public, fully qualified name. */
function hostWarnings(list: 'records' | 'additional_records', records: DomainRecordView[]): DomainWarning[] {
  return records.flatMap((record, index) => {
    const setting = SETTING_OF[record.type];
    const why = setting === undefined ? undefined : whyNotPublicHost(record.value);
    if (setting === undefined || why === undefined) return [];
    return [
      {
        field: `${list}[${index}].value`,
        message:
          `${record.value} is not a public host name (${why}): mail and DNS on the Internet cannot reach it. ` +
          `Set ${setting} to this server's public name before publishing the ${record.record} ${record.type} record.`,
      },
    ];
  });
}

export function toView(domain: Domain, hosts: RecordHosts): DomainView {
  const all: DomainRecordView[] = recordsToPublish(keysOf(domain), hosts).map((record) => ({
    record: record.record,
    name: record.name,
    type: record.type,
    ttl: 'Auto',
    status: domain.record_status[record.key] ?? 'not_started',
    value: record.value,
    ...(record.priority !== undefined && { priority: record.priority }),
    required: record.required,
  }));
  const records = all.filter((record) => RESEND_RECORD_KINDS.has(record.record));
  const additional = all.filter((record) => !RESEND_RECORD_KINDS.has(record.record));
  return {
    object: 'domain',
    id: domain.id,
    name: domain.name,
    status: domain.status,
    verification: domain.status !== 'verified' ? null : domain.trusted ? 'trusted' : 'dns',
    created_at: new Date(domain.created_at).toISOString(),
    region: domain.region,
    capabilities: domainCapabilities(domain.receiving),
    open_tracking: domain.effective_open_tracking,
    click_tracking: domain.effective_click_tracking,
    tls: domain.tls,
    reply_tracking: domain.reply_tracking,
    ...(domain.tracking_subdomain !== null && { tracking_subdomain: domain.tracking_subdomain }),
    records,
    additional_records: additional,
    warnings: [...hostWarnings('records', records), ...hostWarnings('additional_records', additional)],
  };
}
