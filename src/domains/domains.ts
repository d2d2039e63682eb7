import type { Config } from '../platform/config.ts';
import type { Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { isUuid } from '../platform/ids.ts';
import { normalizeDomainName } from '../platform/domain-name.ts';
import { forgetLookups } from '../platform/db/lookup-cache.ts';
import { keysetPage, type Page, type PageRequest } from '../platform/db/keyset-page.ts';
import { withEvent } from '../webhooks/fan-out.ts';
import { generateDkimKeyPair } from './dkim.ts';
import { recordHosts, type RecordHostsConfig } from './domain-records.ts';
import {
  DEFAULT_REGION,
  receivingAskedFor,
  refuseUnsupportedOptions,
  type NewDomainOptions,
} from './domain-options.ts';
import {
  COLUMNS,
  domainEvent,
  requireDomain,
  toView,
  type Domain,
  type DomainChanges,
  type DomainView,
} from './domain-view.ts';

// What callers outside this folder use, from the files that do it.
export type {
  Domain,
  DomainChanges,
  DomainStatus,
  DomainView,
  DomainRecordView,
  DomainWarning,
} from './domain-view.ts';
export { trustDomain, verifyDomain } from './domain-verification.ts';
export { findDomainByName, findSendingDomain, type SendingDomain } from './sending-domains.ts';

// The domains an organization sends from: adding, listing, reading, changing and deleting them. How a
// domain becomes verified is domain-verification.ts; how it is found by name to send is sending-domains.ts;
// how it is shown is domain-view.ts.
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
