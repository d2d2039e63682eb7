import type { Database } from '../platform/db/database.ts';
import { createApiKey } from './api-keys.ts';
import { createOrganization } from './organizations.ts';
import { addDomain, trustDomain } from '../domains/domains.ts';
import type { Config } from '../platform/config.ts';

export interface DevCredentials {
  organizationId: string;
  domain: string;
  fullAccessKey: string;
  sendingAccessKey: string;
}

/**
 * On the first start of an empty embedded database: a development organization with a verified domain
 * and two keys, so that `npm start` can send at once. Never on PostgreSQL (the caller checks), and
 * never twice: it runs only while there is no organization at all, inside one transaction.
 */
export async function bootstrapDevOrganization(db: Database, config: Config): Promise<DevCredentials | undefined> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM organizations');
    if (rows[0]!.n > 0) return undefined;
    const org = await createOrganization(tx, { name: 'Development' });
    const domain = await addDomain(tx, config, org.id, config.devDomain);
    await trustDomain(tx, org.id, domain.id);
    const full = await createApiKey(tx, {
      organizationId: org.id,
      name: 'Development (full access)',
      permission: 'full_access',
    });
    const sending = await createApiKey(tx, {
      organizationId: org.id,
      name: 'Development (sending)',
      permission: 'sending_access',
    });
    return {
      organizationId: org.id,
      domain: config.devDomain,
      fullAccessKey: full.token,
      sendingAccessKey: sending.token,
    };
  });
}
