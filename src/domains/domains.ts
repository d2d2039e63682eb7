import type { Config } from '../platform/config.ts';
import { isUniqueViolation, type Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { generateDkimKeyPair } from './dkim.ts';
import { checkRecords } from './dns-verification.ts';
import { normalizeDomainName } from '../platform/domain-name.ts';
import { withEvent } from '../webhooks/fan-out.ts';
import { domainEventDataSql } from '../webhooks/event-payloads.ts';
import type { EventType } from '../webhooks/event-types.ts';
import {
  recordHosts,
  recordsToPublish,
  type RecordHosts,
  type RecordHostsConfig,
  type RecordKind,
  type RecordStatus,
  type RecordStatuses,
  type RecordType,
} from './domain-records.ts';
import { forgetLookups, lookupCache } from '../platform/db/lookup-cache.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import {
  DEFAULT_REGION,
  domainCapabilities,
  receivingAskedFor,
  refuseUnsupportedOptions,
  type DomainCapabilities,
  type DomainRegion,
  type DomainSettings,
  type DomainTls,
  type NewDomainOptions,
} from './domain-options.ts';

// A domain is verified (allowed to send) once its DKIM key is found in DNS, or when the operator
// attests it (trustDomain). It then stays verified: a later check that cannot find the records only
// updates their statuses, so a DNS outage or a zone edit does not stop an organization's mail. At most
// one organization holds a name verified (the partial unique index domains_verified_name_key).
//
// Open and click tracking can be switched per domain. A domain's own switch (true or false) overrides
// its organization's for the messages sent from it; null follows the organization. The switch in force
// is coalesce(domain, organization), read when a message is sent and again when its open or click
// arrives, and the API shows that value.
//
// A domain's `tls` (Resend's option) says whether its messages may ever go in the clear: 'enforced'
// makes delivery require TLS on every transport (delivery/transports/). Its `region` is only kept and
// answered back (domain-options.ts).
//
// Its receiving capability makes the inbound listener take mail for its addresses (receiving/), once the
// domain is verified. Only one organization's domain of a name can be verified (domains_verified_name_key),
// so one name receives for one organization, and a name added by someone who cannot verify it blocks
// nobody: it receives nothing.
//
// Its `custom_return_path` (fixed once added) and `tracking_subdomain` put its copies' return path and its
// tracking links under its own name; its records then include what those names need (domain-records.ts),
// pointing at hosts of this installation, so the views are built with the configuration.

export type DomainStatus = 'pending' | 'verified';

/** A domain as stored, without its private key (only findSendingDomain reads that). */
export interface Domain {
  id: string;
  organization_id: string;
  name: string;
  status: DomainStatus;
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

/**
 * The API shape, Resend's. `records` holds the kinds Resend's records have (DKIM, SPF);
 * `additional_records` the ones it has no kind for (DMARC), recommended all the same.
 */
export interface DomainView {
  object: 'domain';
  id: string;
  name: string;
  status: DomainStatus;
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

/** What sending needs to accept a `from` address and sign it. */
export interface SendingDomain {
  id: string;
  name: string;
  dkimSelector: string;
  dkimPrivateKey: string;
  /** Whether its messages carry a reply address unless a send says otherwise. */
  replyTracking: boolean;
}

/** A switch in force: the domain's own, else its organization's (valid in RETURNING too). */
const effective = (column: 'open_tracking' | 'click_tracking') =>
  `coalesce(domains.${column}, (SELECT o.${column} FROM organizations o WHERE o.id = domains.organization_id))`;

const COLUMNS = `id, organization_id, name, status, dkim_selector, dkim_public_key, record_status,
  verified_at, last_checked_at, created_at, open_tracking, click_tracking,
  ${effective('open_tracking')} AS effective_open_tracking, ${effective('click_tracking')} AS effective_click_tracking,
  tls, region, custom_return_path, tracking_subdomain, receiving, reply_tracking`;

// Guards status = 'verified' in the statements below, so that the common conflict is an answer rather
// than a failed statement (which would abort a caller's transaction); the unique index settles races.
const NAME_FREE = `NOT EXISTS (SELECT 1 FROM domains other
  WHERE other.name = domains.name AND other.status = 'verified' AND other.id <> domains.id)`;

/** Adds a domain, pending until verified; Resend's options are honoured or refused (domain-options.ts). */
export async function addDomain(
  db: Queryable,
  config: Config,
  organizationId: string,
  name: string,
  options: NewDomainOptions = {},
): Promise<DomainView> {
  refuseUnsupportedOptions(options);
  const domainName = normalizeDomainName(name);
  // A name another organization has proved it owns is theirs; an unverified claim stops no one, since
  // only publishing the DNS records proves ownership.
  const { rowCount: takenElsewhere } = await db.query(
    `SELECT 1 FROM domains WHERE name = $1 AND status = 'verified' AND organization_id <> $2`,
    [domainName, organizationId],
  );
  if (takenElsewhere > 0) {
    throw new ServiceError('conflict', `Domain ${domainName} is verified by another organization`, 'name');
  }
  const receiving = receivingAskedFor(options) ?? false;
  const keys = await generateDkimKeyPair();
  // ON CONFLICT rather than catching the violation: a failed INSERT would abort a caller's transaction.
  const { rows } = await db.query<Domain>(
    withEvent(
      `INSERT INTO domains (organization_id, name, dkim_selector, dkim_private_key, dkim_public_key,
                            open_tracking, click_tracking, tls, region, custom_return_path, tracking_subdomain,
                            receiving, reply_tracking)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
       ON CONFLICT (organization_id, name) DO NOTHING
       RETURNING ${COLUMNS}`,
      domainEvent('$1::uuid', 'domain.created'),
    ),
    [
      organizationId,
      domainName,
      config.dkimSelector,
      keys.privateKey,
      keys.publicKey,
      options.open_tracking ?? null,
      options.click_tracking ?? null,
      options.tls ?? 'opportunistic',
      options.region ?? DEFAULT_REGION,
      options.custom_return_path ?? null,
      options.tracking_subdomain ?? null,
      receiving,
      options.reply_tracking ?? false,
    ],
  );
  if (rows.length === 0) throw new ServiceError('conflict', `Domain ${domainName} has already been added`, 'name');
  return toView(rows[0]!, recordHosts(config));
}

/** Newest first, a page at a time (platform/db/keyset-page.ts). */
export async function listDomains(
  db: Queryable,
  config: RecordHostsConfig,
  organizationId: string,
  page: PageRequest,
): Promise<Page<DomainView>> {
  const listed = await keysetPage<Domain>(
    db,
    { table: 'domains', columns: COLUMNS, organizationId, newestFirst: true },
    page,
  );
  const hosts = recordHosts(config);
  return { ...listed, data: listed.data.map((domain) => toView(domain, hosts)) };
}

export async function getDomain(
  db: Queryable,
  config: RecordHostsConfig,
  organizationId: string,
  id: string,
): Promise<DomainView> {
  return toView(await requireDomain(db, organizationId, id), recordHosts(config));
}

export async function deleteDomain(db: Queryable, organizationId: string, id: string): Promise<void> {
  const { rowCount } = isUuid(id)
    ? await db.query(
        withEvent(
          `DELETE FROM domains WHERE id = $1 AND organization_id = $2 RETURNING ${COLUMNS}`,
          domainEvent('$2::uuid', 'domain.deleted'),
        ),
        [id, organizationId],
      )
    : { rowCount: 0 };
  forgetLookups(db);
  if (rowCount === 0) throw notFound('Domain');
}

/**
 * Changes the domain's tracking switches, tls, tracking subdomain and receiving capability (emitting
 * domain.updated); a body without any changes nothing.
 */
export async function updateDomain(
  db: Queryable,
  config: RecordHostsConfig,
  organizationId: string,
  id: string,
  changes: DomainChanges,
): Promise<DomainView> {
  refuseUnsupportedOptions(changes);
  const setOpen = changes.open_tracking !== undefined;
  const setClick = changes.click_tracking !== undefined;
  const setTracking = changes.tracking_subdomain !== undefined;
  const setReply = changes.reply_tracking !== undefined;
  const receiving = receivingAskedFor(changes);
  if (!setOpen && !setClick && changes.tls === undefined && !setTracking && !setReply && receiving === undefined) {
    return getDomain(db, config, organizationId, id);
  }
  if (!isUuid(id)) throw notFound('Domain');
  if (receiving !== undefined) {
    const current = await requireDomain(db, organizationId, id);
    // SDKs send the capabilities a domain has along with other options: that alone changes nothing.
    if (
      !setOpen &&
      !setClick &&
      changes.tls === undefined &&
      !setTracking &&
      !setReply &&
      current.receiving === receiving
    ) {
      return toView(current, recordHosts(config));
    }
  }
  if (typeof changes.tracking_subdomain === 'string') {
    // The return path never changes once the domain is added, so this check cannot go stale.
    const { custom_return_path } = await requireDomain(db, organizationId, id);
    refuseUnsupportedOptions({ custom_return_path: custom_return_path ?? undefined, ...changes });
  }
  const { rows } = await db.query<Domain>(
    withEvent(
      `UPDATE domains SET
          open_tracking = CASE WHEN $3::boolean THEN $4::boolean ELSE open_tracking END,
          click_tracking = CASE WHEN $5::boolean THEN $6::boolean ELSE click_tracking END,
          tls = coalesce($7::text, tls),
          tracking_subdomain = CASE WHEN $8::boolean THEN $9::text ELSE tracking_subdomain END,
          -- Another tracking name is another record: its last check said nothing about the new one.
          record_status = CASE WHEN $8::boolean AND $9::text IS DISTINCT FROM tracking_subdomain
                               THEN record_status - 'Tracking' ELSE record_status END
                          -- Receiving switched either way: its MX is checked afresh when it is next shown.
                          - CASE WHEN $10::boolean IS DISTINCT FROM receiving AND $10::boolean IS NOT NULL
                                 THEN 'ReceivingMX' ELSE '' END,
          receiving = coalesce($10::boolean, receiving),
          reply_tracking = coalesce($11::boolean, reply_tracking)
        WHERE id = $1 AND organization_id = $2
        RETURNING ${COLUMNS}`,
      domainEvent('$2::uuid', 'domain.updated'),
    ),
    [
      id,
      organizationId,
      setOpen,
      changes.open_tracking ?? null,
      setClick,
      changes.click_tracking ?? null,
      changes.tls ?? null,
      setTracking,
      changes.tracking_subdomain ?? null,
      receiving ?? null,
      changes.reply_tracking ?? null,
    ],
  );
  forgetLookups(db);
  if (!rows[0]) throw notFound('Domain');
  return toView(rows[0], recordHosts(config));
}

/** The operator attests the domain is the organization's: verified without looking at DNS. */
export async function trustDomain(
  db: Queryable,
  config: RecordHostsConfig,
  organizationId: string,
  id: string,
): Promise<DomainView> {
  const domain = await requireDomain(db, organizationId, id);
  const { rows } = await guardVerifiedName(domain.name, () =>
    db.query<Domain>(
      withEvent(
        `UPDATE domains SET status = 'verified', verified_at = coalesce(verified_at, now())
          WHERE id = $1 AND organization_id = $2 AND ${NAME_FREE}
          RETURNING ${COLUMNS}`,
        domainEvent('$2::uuid', 'domain.updated'),
      ),
      [domain.id, organizationId],
    ),
  );
  forgetLookups(db);
  if (rows.length === 0) throw verifiedElsewhere(domain.name);
  return toView(rows[0]!, recordHosts(config));
}

/** Looks the domain's records up in DNS now, stores what was found, and verifies it when DKIM is found. */
export async function verifyDomain(
  db: Queryable,
  config: Config,
  organizationId: string,
  id: string,
): Promise<DomainView> {
  const domain = await requireDomain(db, organizationId, id);
  // No transaction is held across the look-ups: they can take as long as the DNS timeout.
  const records = recordsToPublish(keysOf(domain), recordHosts(config));
  const statuses = await checkRecords(config, records);
  const dkimFound = records.every((record) => !record.required || statuses[record.key] === 'verified');
  const { rows } = await guardVerifiedName(domain.name, () =>
    db.query<Domain>(
      withEvent(
        `UPDATE domains SET
          record_status = $3::jsonb,
          last_checked_at = now(),
          status = CASE WHEN status = 'verified' OR ($4::boolean AND ${NAME_FREE}) THEN 'verified' ELSE 'pending' END,
          verified_at = CASE WHEN status = 'verified' THEN verified_at
                             WHEN $4::boolean AND ${NAME_FREE} THEN now() END
        WHERE id = $1 AND organization_id = $2
        RETURNING ${COLUMNS}`,
        domainEvent('$2::uuid', 'domain.updated'),
      ),
      [domain.id, organizationId, JSON.stringify(statuses), dkimFound],
    ),
  );
  forgetLookups(db);
  const updated = rows[0];
  if (!updated) throw notFound('Domain'); // deleted while DNS was being asked
  if (dkimFound && updated.status !== 'verified') throw verifiedElsewhere(domain.name);
  return toView(updated, recordHosts(config));
}

/** One of the organization's domains by name (the CLI takes names), whatever its status. */
export async function findDomainByName(
  db: Queryable,
  organizationId: string,
  name: string,
): Promise<Domain | undefined> {
  const domainName = normalizedOrUndefined(name);
  if (domainName === undefined) return undefined;
  const { rows } = await db.query<Domain>(`SELECT ${COLUMNS} FROM domains WHERE organization_id = $1 AND name = $2`, [
    organizationId,
    domainName,
  ]);
  return rows[0];
}

/** The organization's domain of that name if it may send (verified), with the key to sign with. */
export async function findSendingDomain(
  db: Queryable,
  organizationId: string,
  name: string,
): Promise<SendingDomain | undefined> {
  const domainName = normalizedOrUndefined(name);
  if (domainName === undefined) return undefined;
  // Cached once found (platform/db/lookup-cache.ts: forgotten in every process when a domain changes).
  return sendingDomainsOf(db).through(`${organizationId} ${domainName}`, async () => {
    const { rows } = await db.query<SendingDomain>(
      `SELECT id, name, dkim_selector AS "dkimSelector", dkim_private_key AS "dkimPrivateKey",
              reply_tracking AS "replyTracking" FROM domains
        WHERE organization_id = $1 AND name = $2 AND status = 'verified'`,
      [organizationId, domainName],
    );
    return rows[0];
  });
}

const sendingDomainsOf = (db: Queryable) => lookupCache<SendingDomain>(db, 'sending-domains');

/** A domain.* webhook event for the changed row (its data: webhooks/event-payloads.ts). */
const domainEvent = (org: string, type: EventType) => ({
  org,
  type: `'${type}'::text`,
  data: domainEventDataSql('changed'),
});

async function requireDomain(db: Queryable, organizationId: string, id: string): Promise<Domain> {
  if (!isUuid(id)) throw notFound('Domain');
  const { rows } = await db.query<Domain>(`SELECT ${COLUMNS} FROM domains WHERE id = $1 AND organization_id = $2`, [
    id,
    organizationId,
  ]);
  if (!rows[0]) throw notFound('Domain');
  return rows[0];
}

/** Runs a statement that may set status = 'verified', turning the lost race for the name into a conflict. */
async function guardVerifiedName<T>(name: string, statement: () => Promise<T>): Promise<T> {
  try {
    return await statement();
  } catch (error) {
    if (isUniqueViolation(error)) throw verifiedElsewhere(name);
    throw error;
  }
}

const verifiedElsewhere = (name: string) =>
  new ServiceError('conflict', `Domain ${name} is already verified by another organization`);

function normalizedOrUndefined(name: string): string | undefined {
  try {
    return normalizeDomainName(name);
  } catch {
    return undefined;
  }
}

const keysOf = (domain: Domain) => ({
  name: domain.name,
  dkimSelector: domain.dkim_selector,
  dkimPublicKey: domain.dkim_public_key,
  customReturnPath: domain.custom_return_path,
  trackingSubdomain: domain.tracking_subdomain,
  receiving: domain.receiving,
});

function toView(domain: Domain, hosts: RecordHosts): DomainView {
  const records: DomainRecordView[] = recordsToPublish(keysOf(domain), hosts).map((record) => ({
    record: record.record,
    name: record.name,
    type: record.type,
    ttl: 'Auto',
    status: domain.record_status[record.key] ?? 'not_started',
    value: record.value,
    ...(record.priority !== undefined && { priority: record.priority }),
    required: record.required,
  }));
  return {
    object: 'domain',
    id: domain.id,
    name: domain.name,
    status: domain.status,
    created_at: new Date(domain.created_at).toISOString(),
    region: domain.region,
    capabilities: domainCapabilities(domain.receiving),
    open_tracking: domain.effective_open_tracking,
    click_tracking: domain.effective_click_tracking,
    tls: domain.tls,
    reply_tracking: domain.reply_tracking,
    ...(domain.tracking_subdomain !== null && { tracking_subdomain: domain.tracking_subdomain }),
    records: records.filter((record) => RESEND_RECORD_KINDS.has(record.record)),
    additional_records: records.filter((record) => !RESEND_RECORD_KINDS.has(record.record)),
  };
}
