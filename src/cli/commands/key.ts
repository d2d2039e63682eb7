// API keys of an organization. Only a hash of each token is stored: the token is printed once.
import { findDomainByName } from '../../domains/domains.ts';
import { createApiKey, listApiKeys } from '../../tenancy/api-keys.ts';
import { listing, requireOrganization, text, UsageError, type Command } from '../command.ts';

export const keyCommands: Record<string, Command> = {
  'key create': {
    usage: 'key create --org ID --name N --permission full_access|sending_access [--domain NAME]',
    description: 'create an API key and print its token (shown only this once)',
    options: {
      org: { type: 'string', required: true, help: "the organization's id" },
      name: { type: 'string', required: true, help: 'a name for the key' },
      permission: {
        type: 'string',
        required: true,
        help: 'full_access (the whole API) or sending_access (sending only)',
      },
      domain: { type: 'string', help: "limit a sending_access key to one of the organization's domains" },
    },
    async run({ values, withDatabase }) {
      const permission = text(values, 'permission');
      if (permission !== 'full_access' && permission !== 'sending_access') {
        throw new UsageError('--permission is full_access or sending_access');
      }
      // --domain limits a sending_access key to one of the organization's domains (the API's domain_id).
      const domainName = values.domain as string | undefined;
      if (domainName !== undefined && permission !== 'sending_access') {
        throw new UsageError('--domain limits a sending_access key: give --permission sending_access with it');
      }
      const key = await withDatabase(async (db) => {
        const organizationId = text(values, 'org');
        await requireOrganization(db, organizationId);
        let domainId: string | undefined;
        if (domainName !== undefined) {
          const found = await findDomainByName(db, organizationId, domainName);
          if (!found) throw new UsageError(`domain ${domainName} is not one of this organization's`);
          domainId = found.id;
        }
        return createApiKey(db, { organizationId, name: text(values, 'name'), permission, domainId });
      });
      const limit = domainName === undefined ? '' : ` (sends only from ${domainName})`;
      return { json: key, text: `${permission} key ${key.id}${limit}: ${key.token}  (shown only now)` };
    },
  },

  'key list': {
    usage: 'key list --org ID',
    description: "list an organization's API keys (never their tokens)",
    options: { org: { type: 'string', required: true, help: "the organization's id" } },
    async run({ values, withDatabase }) {
      const keys = await withDatabase(async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return (await listApiKeys(db, text(values, 'org'))).data;
      });
      // Only a hash of each token is stored: a lost token is replaced with `key create`, never shown again.
      const data = keys.map((key) => ({ ...key, created_at: key.created_at.toISOString() }));
      return {
        json: { data },
        text: listing(
          data,
          (key) =>
            `${key.permission} key ${key.id} "${key.name}"${key.domain_id ? ` (domain ${key.domain_id})` : ''} (created ${key.created_at})`,
        ),
      };
    },
  },
};
