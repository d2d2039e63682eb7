// Organizations: the tenants, each with its own domains, keys, users and limits.
import {
  createOrganization,
  DEFAULT_MONTHLY_QUOTA,
  DEFAULT_RATE_LIMIT,
  listOrganizations,
} from '../../tenancy/organizations.ts';
import { listing, text, UsageError, wholeNumber, type Command } from '../command.ts';

export const organizationCommands: Record<string, Command> = {
  'org create': {
    usage: 'org create --name N [--monthly-quota Q] [--rate-limit R]',
    description: 'create an organization',
    options: {
      name: { type: 'string', required: true, help: 'its name' },
      'monthly-quota': { type: 'string', help: `messages a month it may send (default ${DEFAULT_MONTHLY_QUOTA})` },
      'rate-limit': { type: 'string', help: `messages a second it may send (default ${DEFAULT_RATE_LIMIT})` },
    },
    async run({ values, withDatabase }) {
      const monthlyQuota = wholeNumber(values, 'monthly-quota');
      const rateLimit = wholeNumber(values, 'rate-limit');
      if (rateLimit === 0) throw new UsageError('--rate-limit must be at least 1 message per second');
      const org = await withDatabase((db) =>
        createOrganization(db, { name: text(values, 'name'), monthlyQuota, rateLimit }),
      );
      const json = { id: org.id, name: org.name, monthly_quota: org.monthly_quota, rate_limit: org.rate_limit };
      return {
        json,
        text: `organization ${org.id} "${org.name}" (quota ${org.monthly_quota}/month, ${org.rate_limit} msg/s)`,
      };
    },
  },

  'org list': {
    usage: 'org list',
    description: 'list the organizations',
    options: {},
    async run({ withDatabase }) {
      const orgs = await withDatabase((db) => listOrganizations(db));
      const data = orgs.map((org) => ({
        id: org.id,
        name: org.name,
        monthly_quota: org.monthly_quota,
        rate_limit: org.rate_limit,
        created_at: org.created_at.toISOString(),
      }));
      return {
        json: { data },
        text: listing(data, (org) => `organization ${org.id} "${org.name}" (created ${org.created_at})`),
      };
    },
  },
};
