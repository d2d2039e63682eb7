import { loadConfig, type Config } from '../../src/platform/config.ts';
import type { Database } from '../../src/platform/db/database.ts';
import { buildApp, type App } from '../../src/app.ts';
import { createApiKey } from '../../src/tenancy/api-keys.ts';
import { createOrganization } from '../../src/tenancy/organizations.ts';
import { createSession } from '../../src/tenancy/sessions.ts';
import { createUser } from '../../src/tenancy/users.ts';
import { addDomain, trustDomain } from '../../src/domains/domains.ts';
import { openTestDatabase } from './database.ts';

export interface TestApp {
  app: App;
  db: Database;
  config: Config;
  close(): Promise<void>;
}

/** The real app on this file's own database, configured as in production except for what is passed. */
export async function buildTestApp(env: Record<string, string> = {}): Promise<TestApp> {
  const { db, close } = await openTestDatabase();
  const config = loadConfig({ MAILROOM_LOG_LEVEL: 'silent', ...env });
  const app = await buildApp({ db, config, logger: false });
  await app.ready();
  return {
    app,
    db,
    config,
    async close() {
      await app.close();
      await close();
    },
  };
}

export interface TestOrganization {
  id: string;
  domain: string;
  fullKey: string;
  sendingKey: string;
  session: string;
  userEmail: string;
  password: string;
}

let counter = 0;

/** An organization with a verified domain, one key of each kind, and a user with a live session. */
export async function createTestOrganization(db: Database, config: Config, label = 'org'): Promise<TestOrganization> {
  counter += 1;
  const tag = `${label}${counter}${process.pid}`;
  const org = await createOrganization(db, { name: `Test ${tag}` });
  const domain = `${tag}.example.test`;
  const added = await addDomain(db, config, org.id, domain);
  await trustDomain(db, config, org.id, added.id);
  const full = await createApiKey(db, { organizationId: org.id, name: 'full', permission: 'full_access' });
  const sending = await createApiKey(db, { organizationId: org.id, name: 'sending', permission: 'sending_access' });
  const password = 'correct horse battery staple';
  const user = await createUser(db, { organizationId: org.id, email: `owner@${domain}`, password });
  const session = await createSession(db, user, 1);
  return {
    id: org.id,
    domain,
    fullKey: full.token,
    sendingKey: sending.token,
    session: session.token,
    userEmail: user.email,
    password,
  };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
