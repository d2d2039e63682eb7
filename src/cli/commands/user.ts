// Dashboard users of an organization and their passwords.
import { createUser, listUsers, setUserPassword } from '../../tenancy/users.ts';
import { generatePassword } from '../../tenancy/passwords.ts';
import { listing, requireOrganization, text, UsageError, type Command, type Output, type Values } from '../command.ts';

const org = { type: 'string', required: true, help: "the organization's id" } as const;
const email = { type: 'string', required: true, help: "the user's email address (their sign-in)" } as const;
const password = { type: 'string', help: 'the password (default: one generated and printed once)' } as const;

/** --password, or (without it) one generated, to be printed once so that the user can sign in. */
function passwordOf(values: Values): { password: string; generated: string | undefined } {
  const given = values.password as string | undefined;
  if (given !== undefined) return { password: given, generated: undefined };
  const generated = generatePassword();
  return { password: generated, generated };
}

/** A user's output, with the generated password when there is one (shown only now). */
function withPassword(user: { id: string; email: string }, generated: string | undefined, line: string): Output {
  const json = { id: user.id, email: user.email, ...(generated ? { password: generated } : {}) };
  return { json, text: generated ? `${line} password: ${generated}  (shown only now)` : line };
}

export const userCommands: Record<string, Command> = {
  'user create': {
    usage: 'user create --org ID --email E [--password P]',
    description: 'create a dashboard user (printing the password when one is generated)',
    options: { org, email, password },
    async run({ values, withDatabase }) {
      const { password, generated } = passwordOf(values);
      const user = await withDatabase(async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return createUser(db, { organizationId: text(values, 'org'), email: text(values, 'email'), password });
      });
      return withPassword(user, generated, `user ${user.id} <${user.email}>`);
    },
  },

  'user list': {
    usage: 'user list --org ID',
    description: "list an organization's dashboard users",
    options: { org },
    async run({ values, withDatabase }) {
      const users = await withDatabase(async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return listUsers(db, text(values, 'org'));
      });
      const data = users.map((user) => ({ id: user.id, email: user.email, created_at: user.created_at.toISOString() }));
      return { json: { data }, text: listing(data, (user) => `user ${user.id} <${user.email}>`) };
    },
  },

  'user password': {
    usage: 'user password --org ID --email E [--password P]',
    description: "set a user's password, ending their sessions",
    options: { org, email, password },
    async run({ values, withDatabase }) {
      // The user's sessions end either way.
      const { password, generated } = passwordOf(values);
      const user = await withDatabase(async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return setUserPassword(db, { organizationId: text(values, 'org'), email: text(values, 'email'), password });
      });
      if (!user) throw new UsageError(`no user ${values.email} in organization ${values.org}`);
      return withPassword(user, generated, `user ${user.id} <${user.email}>: password set`);
    },
  },
};
