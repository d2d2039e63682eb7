import type { Config } from '../platform/config.ts';
import { isUniqueViolation, type Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { forgetLookups } from '../platform/db/lookup-cache.ts';
import { withEvent } from '../webhooks/fan-out.ts';
import { checkRecords } from './dns-verification.ts';
import { recordHosts, recordsToPublish, type RecordHostsConfig } from './domain-records.ts';
import { COLUMNS, domainEvent, keysOf, requireDomain, toView, type Domain, type DomainView } from './domain-view.ts';

// A domain is verified (allowed to send) once its DKIM key is found in DNS, or when the operator
// attests it (trustDomain): it is then `trusted` until a check finds its DKIM record. It stays verified
// either way: a later check that cannot find the records only updates their statuses, so a DNS outage or
// a zone edit does not stop an organization's mail. At most one organization holds a name verified (the
// partial unique index domains_verified_name_key).

// Guards status = 'verified' in the statements below, so that the common conflict is an answer rather
// than a failed statement (which would abort a caller's transaction); the unique index settles races.
const NAME_FREE = `NOT EXISTS (SELECT 1 FROM domains other
  WHERE other.name = domains.name AND other.status = 'verified' AND other.id <> domains.id)`;

/**
 * The operator attests the domain is the organization's: verified without looking at DNS, and marked
 * trusted so that nobody reads it as DNS-verified. A domain already verified by DNS stays so.
 */
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
        `UPDATE domains SET status = 'verified', verified_at = coalesce(verified_at, now()),
                            trusted = (status <> 'verified' OR trusted)
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

/**
 * Looks the domain's records up in DNS now, stores what was found, and verifies it when DKIM is found
 * (a trusted domain is then verified by DNS).
 */
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
                             WHEN $4::boolean AND ${NAME_FREE} THEN now() END,
          trusted = trusted AND NOT $4::boolean
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
