// Sending (and receiving) domains of an organization: added, verified, checked, receiving switched.
import { checkDomain } from '../../doctor/doctor.ts';
import { doctorContext } from '../../doctor/doctor-routes.ts';
import { addDomain, findDomainByName, trustDomain, updateDomain, verifyDomain } from '../../domains/domains.ts';
import { requireOrganization, text, UsageError, type Command } from '../command.ts';

const org = { type: 'string', required: true, help: "the organization's id" } as const;
const domainName = { name: 'NAME', help: 'the domain, e.g. example.com' };

export const domainCommands: Record<string, Command> = {
  'domain add': {
    usage: 'domain add --org ID NAME',
    description: 'add a sending domain and print the DNS records to publish',
    options: { org },
    positionals: [domainName],
    async run({ config, values, positionals, withDatabase }) {
      const domain = await withDatabase(async (db) => {
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
    description: "check a domain's DNS records now (or, with --trust, mark it verified without DNS)",
    options: {
      org,
      trust: { type: 'boolean', default: false, help: 'mark it verified without looking at DNS (tests, development)' },
    },
    positionals: [domainName],
    async run({ config, values, positionals, withDatabase }) {
      const domain = await withDatabase(async (db) => {
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
    description: "run the deliverability doctor's checks of a domain, with the fix of each finding",
    options: { org },
    positionals: [domainName],
    async run({ config, values, positionals, withDatabase }) {
      const health = await withDatabase(async (db) => {
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
    description: 'let a domain receive mail (and print its MX record), or stop it',
    options: { org },
    positionals: [domainName, { name: 'on|off', help: 'receive mail or not' }],
    async run({ config, values, positionals, withDatabase }) {
      const [name, setting] = positionals as [string, string];
      if (setting !== 'on' && setting !== 'off') throw new UsageError(`say on or off, not "${setting}"`);
      const domain = await withDatabase(async (db) => {
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
};
