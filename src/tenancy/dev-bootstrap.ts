import type { Database } from '../platform/db/database.ts';
import { createApiKey } from './api-keys.ts';
import { createOrganization } from './organizations.ts';
import { addDomain, trustDomain } from '../domains/domains.ts';
import type { Config } from '../platform/config.ts';
import { createUser } from './users.ts';
import { generatePassword } from './passwords.ts';

export interface DevCredentials {
  organizationId: string;
  domain: string;
  fullAccessKey: string;
  sendingAccessKey: string;
  /** The dashboard user: admin@<the development domain>. */
  userEmail: string;
  userPassword: string;
}

/** The development user's local part; the domain is the development domain. */
export const DEV_USER_LOCAL_PART = 'admin';

/**
 * On the first start of an empty embedded database: a development organization with a verified domain,
 * two keys and a dashboard user with a random password, so that `npm start` can send and sign in at once.
 * Never on PostgreSQL (the caller checks), and never twice: it runs only while there is no organization
 * at all, inside one transaction. The server calls it only once every port is bound, so that a start
 * that fails creates nothing whose credentials would never be shown.
 */
export async function bootstrapDevOrganization(db: Database, config: Config): Promise<DevCredentials | undefined> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM organizations');
    if (rows[0]!.n > 0) return undefined;
    const org = await createOrganization(tx, { name: 'Development' });
    const domain = await addDomain(tx, config, org.id, config.devDomain);
    await trustDomain(tx, config, org.id, domain.id);
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
    const userPassword = generatePassword();
    const user = await createUser(tx, {
      organizationId: org.id,
      email: `${DEV_USER_LOCAL_PART}@${config.devDomain}`,
      password: userPassword,
    });
    return {
      organizationId: org.id,
      domain: config.devDomain,
      fullAccessKey: full.token,
      sendingAccessKey: sending.token,
      userEmail: user.email,
      userPassword,
    };
  });
}

/** The dashboard's address for the console: a wildcard listen address is reached as localhost. */
export function dashboardUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' || host === '' ? 'localhost' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}/`;
}
