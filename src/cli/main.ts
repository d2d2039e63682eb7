// The operator CLI (`npx mailroom …`). Each command prints one JSON object with --json, a readable
// line without it; failures exit 1 with the reason (as {"error": {...}} under --json).
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../platform/config.ts';
import { isConnectionLost, type Database } from '../platform/db/database.ts';
import { migrate } from '../platform/db/migrate.ts';
import { openDatabase } from '../platform/db/open.ts';
import { ServiceError } from '../platform/errors.ts';
import { runServer, type Role } from '../server.ts';
import { StartupError } from '../platform/listen-error.ts';
import { loadShapingFile, ShapingFileError, type ShapingPolicy } from '../shaping/shaping-file.ts';
import { listPools, listSources } from '../shaping/sources.ts';
import { checkDomain } from '../doctor/doctor.ts';
import { doctorContext } from '../doctor/doctor-routes.ts';
import { listDestinations, pauseSite, resumeSite } from '../shaping/destinations.ts';
import { parseDuration } from '../shaping/limits.ts';
import { normalizeSiteId } from '../shaping/sites.ts';
import { createApiKey, listApiKeys } from '../tenancy/api-keys.ts';
import { createOrganization, findOrganization, listOrganizations } from '../tenancy/organizations.ts';
import { createSession } from '../tenancy/sessions.ts';
import { createUser, findUserByEmail, listUsers, setUserPassword } from '../tenancy/users.ts';
import { generatePassword } from '../tenancy/passwords.ts';
import { addDomain, findDomainByName, trustDomain, updateDomain, verifyDomain } from '../domains/domains.ts';
import {
  createRoute,
  deleteRoute,
  listRoutes,
  type InboundRouteView,
  type RouteInput,
} from '../receiving/inbound-routes.ts';

type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

interface Output {
  json: object;
  text: string;
}

interface Command {
  usage: string;
  options: NonNullable<ParseArgsConfig['options']>;
  positionals?: number;
  run(input: { config: Config; values: Values; positionals: string[] }): Promise<Output | void>;
}

class UsageError extends Error {}

/** Opens the configured database, migrated, for the length of one command. */
async function withDatabase<T>(config: Config, fn: (db: Database) => Promise<T>): Promise<T> {
  const db = await openDatabase(config);
  try {
    await migrate(db);
    return await fn(db);
  } finally {
    await db.close();
  }
}

async function requireOrganization(db: Database, id: string) {
  const org = await findOrganization(db, id);
  if (!org) throw new UsageError(`organization ${id} not found`);
  return org;
}

function wholeNumber(values: Values, name: string): number | undefined {
  const value = values[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^\d+$/.test(value)) throw new UsageError(`--${name} takes a whole number`);
  return Number(value);
}

const text = (values: Values, name: string) => values[name] as string;

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

const COMMANDS: Record<string, Command> = {
  serve: {
    usage: 'serve [--role all|api|worker]',
    options: { role: { type: 'string', default: 'all' } },
    async run({ config, values }) {
      const role = text(values, 'role');
      if (!['all', 'api', 'worker'].includes(role)) throw new UsageError('--role is all, api or worker');
      await runServer(config, role as Role);
    },
  },

  migrate: {
    usage: 'migrate',
    options: {},
    async run({ config }) {
      const db = await openDatabase(config);
      try {
        const applied = await migrate(db);
        return {
          json: { applied },
          text: applied.length
            ? `applied ${applied.length} migration(s): ${applied.join(', ')}`
            : 'database is up to date',
        };
      } finally {
        await db.close();
      }
    },
  },

  'org create': {
    usage: 'org create --name N [--monthly-quota Q] [--rate-limit R]',
    options: { name: { type: 'string' }, 'monthly-quota': { type: 'string' }, 'rate-limit': { type: 'string' } },
    async run({ config, values }) {
      const monthlyQuota = wholeNumber(values, 'monthly-quota');
      const rateLimit = wholeNumber(values, 'rate-limit');
      if (rateLimit === 0) throw new UsageError('--rate-limit must be at least 1 message per second');
      const org = await withDatabase(config, (db) =>
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
    options: {},
    async run({ config }) {
      const orgs = await withDatabase(config, (db) => listOrganizations(db));
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

  'domain add': {
    usage: 'domain add --org ID NAME',
    options: { org: { type: 'string' } },
    positionals: 1,
    async run({ config, values, positionals }) {
      const domain = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return addDomain(db, config, text(values, 'org'), positionals[0]!);
      });
      const records = [...domain.records, ...domain.additional_records]
        .map((r: { type: string; name: string; value: string }) => `  ${r.type} ${r.name}  "${r.value}"`)
        .join('\n');
      return { json: domain, text: `domain ${domain.name} added (${domain.status}); publish:\n${records}` };
    },
  },

  'domain verify': {
    usage: 'domain verify --org ID NAME [--trust]',
    options: { org: { type: 'string' }, trust: { type: 'boolean', default: false } },
    positionals: 1,
    async run({ config, values, positionals }) {
      const domain = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        const found = await findDomainByName(db, text(values, 'org'), positionals[0]!);
        if (!found) throw new UsageError(`domain ${positionals[0]} is not one of this organization's`);
        return values.trust
          ? trustDomain(db, config, text(values, 'org'), found.id)
          : verifyDomain(db, config, text(values, 'org'), found.id);
      });
      return { json: domain, text: `domain ${domain.name}: ${domain.status}` };
    },
  },

  'domain check': {
    usage: 'domain check --org ID NAME',
    options: { org: { type: 'string' } },
    positionals: 1,
    async run({ config, values, positionals }) {
      const health = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        const found = await findDomainByName(db, text(values, 'org'), positionals[0]!);
        if (!found) throw new UsageError(`domain ${positionals[0]} is not one of this organization's`);
        return checkDomain(doctorContext(db, config), text(values, 'org'), found.id);
      });
      const lines = health.findings.map(
        (f) => `${f.status.padEnd(4)}  ${f.check} · ${f.subject}: ${f.summary}${f.fix ? `\n      fix: ${f.fix}` : ''}`,
      );
      return { json: health, text: [`domain ${health.domain}: ${health.status}`, ...lines].join('\n') };
    },
  },

  'domain receiving': {
    usage: 'domain receiving --org ID NAME on|off',
    options: { org: { type: 'string' } },
    positionals: 2,
    async run({ config, values, positionals }) {
      const [name, setting] = positionals as [string, string];
      if (setting !== 'on' && setting !== 'off') throw new UsageError(`say on or off, not "${setting}"`);
      const domain = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        const found = await findDomainByName(db, text(values, 'org'), name);
        if (!found) throw new UsageError(`domain ${name} is not one of this organization's`);
        // The API's change (capabilities.receiving): mail is taken once the domain is verified.
        return updateDomain(db, config, text(values, 'org'), found.id, {
          capabilities: { receiving: setting === 'on' ? 'enabled' : 'disabled' },
        });
      });
      const mx = domain.records.find((record) => record.record === 'Receiving');
      return {
        json: domain,
        text: mx
          ? `domain ${domain.name} receives mail; publish:\n  MX ${mx.name}  ${mx.priority} ${mx.value}`
          : `domain ${domain.name} does not receive mail`,
      };
    },
  },

  'key create': {
    usage: 'key create --org ID --name N --permission full_access|sending_access [--domain NAME]',
    options: {
      org: { type: 'string' },
      name: { type: 'string' },
      permission: { type: 'string' },
      domain: { type: 'string' },
    },
    async run({ config, values }) {
      const permission = text(values, 'permission');
      if (permission !== 'full_access' && permission !== 'sending_access') {
        throw new UsageError('--permission is full_access or sending_access');
      }
      // --domain limits a sending_access key to one of the organization's domains (the API's domain_id).
      const domainName = values.domain as string | undefined;
      if (domainName !== undefined && permission !== 'sending_access') {
        throw new UsageError('--domain limits a sending_access key: give --permission sending_access with it');
      }
      const key = await withDatabase(config, async (db) => {
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
    options: { org: { type: 'string' } },
    async run({ config, values }) {
      const keys = await withDatabase(config, async (db) => {
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

  'user create': {
    usage: 'user create --org ID --email E [--password P]',
    options: { org: { type: 'string' }, email: { type: 'string' }, password: { type: 'string' } },
    async run({ config, values }) {
      const { password, generated } = passwordOf(values);
      const user = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return createUser(db, { organizationId: text(values, 'org'), email: text(values, 'email'), password });
      });
      return withPassword(user, generated, `user ${user.id} <${user.email}>`);
    },
  },

  'user list': {
    usage: 'user list --org ID',
    options: { org: { type: 'string' } },
    async run({ config, values }) {
      const users = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return listUsers(db, text(values, 'org'));
      });
      const data = users.map((user) => ({ id: user.id, email: user.email, created_at: user.created_at.toISOString() }));
      return { json: { data }, text: listing(data, (user) => `user ${user.id} <${user.email}>`) };
    },
  },

  'user password': {
    usage: 'user password --org ID --email E [--password P]',
    options: { org: { type: 'string' }, email: { type: 'string' }, password: { type: 'string' } },
    async run({ config, values }) {
      // The user's sessions end either way.
      const { password, generated } = passwordOf(values);
      const user = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return setUserPassword(db, { organizationId: text(values, 'org'), email: text(values, 'email'), password });
      });
      if (!user) throw new UsageError(`no user ${values.email} in organization ${values.org}`);
      return withPassword(user, generated, `user ${user.id} <${user.email}>: password set`);
    },
  },

  'destinations list': {
    usage: 'destinations list',
    options: {},
    async run({ config }) {
      const policy = loadShapingFile(config.shapingFile);
      const data = await withDatabase(config, (db) => listDestinations(db, policy, new Date()));
      return {
        json: { data },
        text: listing(
          data,
          (d) =>
            `${d.site}  ${d.connections}/${d.limits.connection_limit} connections, ${d.queued} queued` +
            (d.paused_until ? `, paused until ${d.paused_until} (${d.pause_reason}: ${d.pause_reply ?? ''})` : ''),
        ),
      };
    },
  },

  'destinations pause': {
    usage: 'destinations pause SITE [--for 30m] [--source S]',
    options: { for: { type: 'string', default: '1h' }, source: { type: 'string' } },
    positionals: 1,
    async run({ config, values, positionals }) {
      const forMs = parseDuration(text(values, 'for'));
      if (forMs === undefined) throw new UsageError('--for is a duration such as 30m, 2h or 1d');
      const policy = loadShapingFile(config.shapingFile);
      const now = new Date();
      const until = new Date(now.getTime() + forMs);
      const site = normalizeSiteId(positionals[0]!);
      const sources = sourcesAt(policy, site, values.source as string | undefined);
      await withDatabase(config, async (db) => {
        for (const source of sources)
          await pauseSite(db, policy, { source, site }, until, now, 'paused by the operator');
      });
      const json = { site, sources, paused_until: until.toISOString() };
      return { json, text: `${site} paused until ${json.paused_until} (${sources.join(', ')})` };
    },
  },

  'destinations resume': {
    usage: 'destinations resume SITE [--source S]',
    options: { source: { type: 'string' } },
    positionals: 1,
    async run({ config, values, positionals }) {
      const policy = loadShapingFile(config.shapingFile);
      const site = normalizeSiteId(positionals[0]!);
      const sources = sourcesAt(policy, site, values.source as string | undefined);
      await withDatabase(config, async (db) => {
        for (const source of sources) await resumeSite(db, policy, { source, site }, new Date());
      });
      return { json: { site, sources, paused_until: null }, text: `${site} resumed (${sources.join(', ')})` };
    },
  },

  'sources list': {
    usage: 'sources list',
    options: {},
    async run({ config }) {
      const { egress } = loadShapingFile(config.shapingFile);
      const data = await withDatabase(config, (db) => listSources(db, egress, new Date()));
      return {
        json: { data, pools: listPools(egress) },
        text: listing(data, (source) => {
          const where = source.kind === 'relay' ? `relay ${source.relay}` : (source.address ?? 'the host address');
          const warmup = source.warmup.map((w) =>
            w.warm
              ? `${w.site} warm`
              : `${w.site} stage ${w.stage}/${w.stages}: ${w.sent_today} of ${w.allowance_today} today`,
          );
          return [
            `${source.name}  ${where}  pools: ${source.pools.join(', ')}`,
            ...warmup.map((line) => `  ${line}`),
          ].join('\n');
        }),
      };
    },
  },

  'route add': {
    usage:
      'route add --org ID --kind exact|domain|plus_tag|regex|catch_all [--recipient R] [--priority N] [--header NAME --header-pattern P] [--forward ADDRESS]... [--webhook ENDPOINT_ID] [--reject MESSAGE] [--stop] [--description D]',
    options: {
      org: { type: 'string' },
      kind: { type: 'string' },
      recipient: { type: 'string' },
      priority: { type: 'string' },
      header: { type: 'string' },
      'header-pattern': { type: 'string' },
      forward: { type: 'string', multiple: true },
      webhook: { type: 'string' },
      reject: { type: 'string' },
      stop: { type: 'boolean', default: false },
      description: { type: 'string' },
    },
    async run({ config, values }) {
      const header = values.header as string | undefined;
      const headerPattern = values['header-pattern'] as string | undefined;
      if ((header === undefined) !== (headerPattern === undefined)) {
        throw new UsageError('--header and --header-pattern go together');
      }
      // The same route the API makes: store, plus what the options ask for (reject alone).
      const actions: NonNullable<RouteInput['actions']> = [];
      const forward = values.forward as string[] | undefined;
      if (values.reject !== undefined) actions.push({ type: 'reject', message: text(values, 'reject') });
      else actions.push({ type: 'store' });
      if (forward !== undefined) actions.push({ type: 'forward', to: forward });
      if (values.webhook !== undefined) actions.push({ type: 'webhook', endpoint_id: text(values, 'webhook') });
      const input: RouteInput = {
        description: values.description as string | undefined,
        priority: wholeNumber(values, 'priority'),
        match: {
          recipient_kind: text(values, 'kind') as NonNullable<RouteInput['match']>['recipient_kind'],
          recipient: values.recipient as string | undefined,
          ...(header !== undefined ? { header: { name: header, pattern: headerPattern! } } : {}),
        },
        actions,
        stop: values.stop === true,
      };
      const route = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return createRoute(db, text(values, 'org'), input);
      });
      return { json: route, text: `route ${route.id}: ${routeLine(route)}` };
    },
  },

  'route list': {
    usage: 'route list --org ID',
    options: { org: { type: 'string' } },
    async run({ config, values }) {
      const routes = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return (await listRoutes(db, text(values, 'org'), {})).data;
      });
      return { json: { data: routes }, text: listing(routes, (route) => `route ${route.id}: ${routeLine(route)}`) };
    },
  },

  'route remove': {
    usage: 'route remove --org ID ROUTE_ID',
    options: { org: { type: 'string' } },
    positionals: 1,
    async run({ config, values, positionals }) {
      const { id } = await withDatabase(config, async (db) => {
        await requireOrganization(db, text(values, 'org'));
        return deleteRoute(db, text(values, 'org'), positionals[0]!);
      });
      return { json: { id, deleted: true }, text: `route ${id} removed` };
    },
  },

  'session create': {
    usage: 'session create --org ID --email E',
    options: { org: { type: 'string' }, email: { type: 'string' } },
    async run({ config, values }) {
      const session = await withDatabase(config, async (db) => {
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

const REQUIRED: Record<string, string[]> = {
  'org create': ['name'],
  'domain add': ['org'],
  'domain verify': ['org'],
  'domain check': ['org'],
  'domain receiving': ['org'],
  'key create': ['org', 'name', 'permission'],
  'key list': ['org'],
  'user create': ['org', 'email'],
  'user list': ['org'],
  'user password': ['org', 'email'],
  'session create': ['org', 'email'],
  'route add': ['org', 'kind'],
  'route list': ['org'],
  'route remove': ['org'],
};

/** One route in a line: priority, what it matches, what it does. */
function routeLine(route: InboundRouteView): string {
  const { match } = route;
  const header = match.header ? ` and ${match.header.name} ~ /${match.header.pattern}/` : '';
  const actions = route.actions
    .map((action) =>
      action.type === 'forward'
        ? `forward to ${action.to.join(', ')}`
        : action.type === 'webhook'
          ? `webhook ${action.endpoint_id}`
          : action.type === 'reject'
            ? `reject "${action.message ?? ''}"`
            : 'store',
    )
    .join(', ');
  const flags = `${route.stop ? ', stop' : ''}${route.enabled ? '' : ' (disabled)'}`;
  return `#${route.priority} ${match.recipient_kind} ${match.recipient}${header} -> ${actions}${flags}`;
}

/** A readable listing: one line a row, or a line saying there is none. */
function listing<T>(rows: T[], line: (row: T) => string): string {
  return rows.length === 0 ? '(none)' : rows.map(line).join('\n');
}

function help(): string {
  return ['usage: mailroom <command> [--json]', ...Object.values(COMMANDS).map((c) => `  mailroom ${c.usage}`)].join(
    '\n',
  );
}

export async function main(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const args = argv.filter((arg) => arg !== '--json');
  const name = COMMANDS[`${args[0]} ${args[1]}`] ? `${args[0]} ${args[1]}` : args[0];
  const command = name ? COMMANDS[name] : undefined;
  const fail = (error: { name: string; message: string }, code = 1) => {
    if (json) process.stdout.write(`${JSON.stringify({ error })}\n`);
    else process.stderr.write(`mailroom: ${error.message}\n`);
    return code;
  };
  if (!name || !command) {
    if (args.length === 0 || args[0] === 'help' || args[0] === '--help') {
      process.stdout.write(`${help()}\n`);
      return args.length === 0 ? 2 : 0;
    }
    return fail({ name: 'usage', message: `unknown command "${args.slice(0, 2).join(' ')}"\n${help()}` }, 2);
  }
  try {
    const rest = args.slice(name.split(' ').length);
    const { values, positionals } = parseArgs({ args: rest, options: command.options, allowPositionals: true });
    if (positionals.length !== (command.positionals ?? 0)) throw new UsageError(`usage: mailroom ${command.usage}`);
    for (const option of REQUIRED[name] ?? []) {
      if (typeof values[option] !== 'string' || values[option] === '') {
        throw new UsageError(`--${option} is required (usage: mailroom ${command.usage})`);
      }
    }
    const config = loadConfig();
    const output = await command.run({ config, values, positionals });
    if (output) process.stdout.write(`${json ? JSON.stringify(output.json) : output.text}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      return fail({ name: 'usage', message: (error as Error).message }, 2);
    }
    if (error instanceof ServiceError) return fail({ name: error.name, message: error.message });
    if (error instanceof ConfigError) return fail({ name: 'configuration', message: error.message });
    if ((error as Error).name === 'DataDirInUseError')
      return fail({ name: 'data_dir_in_use', message: (error as Error).message });
    if (error instanceof StartupError || error instanceof ShapingFileError) {
      return fail({ name: 'startup', message: error.message });
    }
    if (isConnectionLost(error)) {
      const message = `cannot reach the database (DATABASE_URL): ${(error as Error).message}`;
      return fail({ name: 'database_unreachable', message });
    }
    return fail({ name: 'error', message: (error as Error).stack ?? String(error) });
  }
}

/** The sources a pause of `site` applies to: the one named, or every source whose connections meet the site. */
function sourcesAt(policy: ShapingPolicy, site: string, named: string | undefined): string[] {
  const { sources } = policy.egress;
  if (named !== undefined) {
    const source = sources.get(named);
    if (!source) throw new UsageError(`no source ${named} (sources: ${[...sources.keys()].join(', ')})`);
    // A relay source meets every site through the relay: its one site is `relay`.
    if (policy.egress.declared && (source.kind === 'relay') !== (site === 'relay')) {
      throw new UsageError(
        source.kind === 'relay'
          ? `source ${named} is a relay: its connections count against the site relay, not ${site}`
          : `source ${named} sends from an address: it has no connections to the site relay`,
      );
    }
    return [named];
  }
  // A relay source's connections all count against the site `relay`; an address source's against the site itself.
  return [...sources.values()]
    .filter((source) => (source.kind === 'relay') === (site === 'relay') || !policy.egress.declared)
    .map((source) => source.name);
}
