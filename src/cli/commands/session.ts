// Dashboard sessions, made without a password: a token for a user, e.g. for a script.
import { createSession } from '../../tenancy/sessions.ts';
import { findUserByEmail } from '../../tenancy/users.ts';
import { requireOrganization, text, UsageError, type Command } from '../command.ts';

export const sessionCommands: Record<string, Command> = {
  'session create': {
    usage: 'session create --org ID --email E',
    description: 'create a dashboard session for a user and print its token',
    options: {
      org: { type: 'string', required: true, help: "the organization's id" },
      email: { type: 'string', required: true, help: "the user's email address" },
    },
    async run({ config, values, withDatabase }) {
      const session = await withDatabase(async (db) => {
        await requireOrganization(db, text(values, 'org'));
        const user = await findUserByEmail(db, text(values, 'email'));
        if (!user || user.organization_id !== values.org) {
          throw new UsageError(`no user ${values.email} in organization ${values.org}`);
        }
        return createSession(db, user, config.sessionTtlHours);
      });
      const json = { token: session.token, expires_at: session.expires_at.toISOString() };
      return { json, text: `session token ${json.token} (expires ${json.expires_at})` };
    },
  },
};
