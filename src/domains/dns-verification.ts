import { NODATA, NOTFOUND, Resolver } from 'node:dns/promises';
import type { Config } from '../platform/config.ts';
import type { DnsRecord, RecordKind, RecordStatus } from './domain-records.ts';

// Answers that prove a name has no TXT record. Every other error (timeout, SERVFAIL, refused, network)
// says nothing about the records, so the record is left pending rather than failed.
const ABSENT = new Set<string>([NOTFOUND, NODATA]);

type TxtAnswer = { txts: string[] } | { undetermined: true };

/** Looks every record up in DNS and says, for each, whether it is published. Never throws. */
export async function checkRecords(config: Config, records: DnsRecord[]): Promise<Record<RecordKind, RecordStatus>> {
  const resolver = new Resolver({ timeout: config.dnsTimeoutMs, tries: 1 });
  if (config.dnsServers.length > 0) resolver.setServers(config.dnsServers);
  const lookups = new Map<string, Promise<TxtAnswer>>();
  const lookup = (name: string) => {
    if (!lookups.has(name)) lookups.set(name, resolveTxt(resolver, name));
    return lookups.get(name)!;
  };
  const statuses = await Promise.all(
    records.map(async (record): Promise<[RecordKind, RecordStatus]> => {
      const answer = await lookup(record.name);
      if (!('txts' in answer)) return [record.record, 'pending'];
      return [record.record, record.isPublished(answer.txts) ? 'verified' : 'failed'];
    }),
  );
  return Object.fromEntries(statuses) as Record<RecordKind, RecordStatus>;
}

async function resolveTxt(resolver: Resolver, name: string): Promise<TxtAnswer> {
  try {
    // A TXT record longer than 255 octets arrives as several character-strings: one value, joined as-is.
    const records = await resolver.resolveTxt(name);
    return { txts: records.map((chunks) => chunks.join('')) };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code !== undefined && ABSENT.has(code) ? { txts: [] } : { undetermined: true };
  }
}
