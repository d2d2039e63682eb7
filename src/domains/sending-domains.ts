import type { Queryable } from '../platform/db/database.ts';
import { lookupCache } from '../platform/db/lookup-cache.ts';
import { COLUMNS, normalizedOrUndefined, type Domain } from './domain-view.ts';

// Domains found by name: the CLI's, and sending's (which may send from it, and with which key).

/** What sending needs to accept a `from` address and sign it. */
export interface SendingDomain {
  id: string;
  name: string;
  dkimSelector: string;
  dkimPrivateKey: string;
  /** Whether its messages carry a reply address unless a send says otherwise. */
  replyTracking: boolean;
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
