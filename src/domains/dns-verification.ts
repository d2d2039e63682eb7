import { NODATA, NOTFOUND, Resolver } from 'node:dns/promises';
import type { Config } from '../platform/config.ts';
import type { DnsRecord, RecordKey, RecordStatus, RecordType } from './domain-records.ts';

// Answers that prove a name has no record of the type asked. Every other error (timeout, SERVFAIL,
// refused, network) says nothing about the records, so the record is left pending rather than failed.
const ABSENT = new Set<string>([NOTFOUND, NODATA]);

type Answer = { found: string[] } | { undetermined: true };

/** Looks every record up in DNS and says, for each, whether it is published. Never throws. */
export async function checkRecords(config: Config, records: DnsRecord[]): Promise<Record<RecordKey, RecordStatus>> {
  const resolver = new Resolver({ timeout: config.dnsTimeoutMs, tries: 1 });
  if (config.dnsServers.length > 0) resolver.setServers(config.dnsServers);
  const lookups = new Map<string, Promise<Answer>>();
  const lookup = (type: RecordType, name: string) => {
    const key = `${type} ${name}`;
    if (!lookups.has(key)) lookups.set(key, resolve(resolver, type, name));
    return lookups.get(key)!;
  };
  const statuses = await Promise.all(
    records.map(async (record): Promise<[RecordKey, RecordStatus]> => {
      const answer = await lookup(record.type, record.name);
      if (!('found' in answer)) return [record.key, 'pending'];
      return [record.key, record.isPublished(answer.found) ? 'verified' : 'failed'];
    }),
  );
  return Object.fromEntries(statuses) as Record<RecordKey, RecordStatus>;
}

/** Host names compare lower case, without the root's trailing dot. */
const hostName = (name: string) => name.toLowerCase().replace(/\.$/, '');

async function resolve(resolver: Resolver, type: RecordType, name: string): Promise<Answer> {
  try {
    switch (type) {
      case 'TXT':
        // A TXT record longer than 255 octets arrives as several character-strings: one value, joined as-is.
        return { found: (await resolver.resolveTxt(name)).map((chunks) => chunks.join('')) };
      case 'MX':
        return { found: (await resolver.resolveMx(name)).map((mx) => hostName(mx.exchange)) };
      case 'CNAME':
        return { found: (await resolver.resolveCname(name)).map(hostName) };
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code !== undefined && ABSENT.has(code) ? { found: [] } : { undetermined: true };
  }
}
