import type { Resolver } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { evaluateSpf, SPF_LOOKUP_LIMIT } from './spf.ts';
import { CHECK_AGAIN, returnPathDomainOf, type AddFinding, type DoctorContext, type DomainRow } from './findings.ts';

// The egress sources a domain's mail leaves from (the shaping file's): for each address, its PTR
// (confirmed forward and matching the source's EHLO name), the DNS blocklists, and SPF for the envelope
// domain; a relay's addresses are the relay's, which the doctor cannot see.

/** The ptr, blocklist and spf findings of every egress source, for the domain's envelope. */
export async function checkSources(ctx: DoctorContext, domain: DomainRow, add: AddFinding): Promise<void> {
  // Per source: its address's PTR (confirmed forward, matching its EHLO name), blocklists, and SPF.
  const addressSources = [...ctx.egress.sources.values()].filter((s) => s.kind === 'address');
  // The envelope domain receivers check SPF against: the return-path domain when there is one (every
  // copy's MAIL FROM is its VERP address there), else the sending domain itself.
  const envelopeDomains = [returnPathDomainOf(ctx, domain) ?? domain.name];
  for (const source of addressSources) {
    if (source.kind !== 'address') continue;
    if (source.address === undefined) {
      add(
        'ptr',
        `source ${source.name}`,
        'warn',
        'the address Mailroom sends from is not declared, so its PTR, SPF and blocklists cannot be checked',
        'Declare it in the shaping file: [source.<name>] address = "…", ehlo = "…" (docs/shaping.md).',
      );
      continue;
    }
    const subject = `source ${source.name} (${source.address})`;
    const ehlo = source.ehlo ?? ctx.config.heloName;
    let names: string[] = [];
    try {
      names = await ctx.resolver.reverse(source.address);
    } catch {
      names = [];
    }
    if (names.length === 0) {
      add(
        'ptr',
        subject,
        'fail',
        `${source.address} has no PTR record: Gmail refuses mail from it (550 5.7.25)`,
        `Have the address's owner (your hosting provider) set its PTR to ${ehlo ?? 'the EHLO name'}.`,
      );
    } else {
      const confirmed: string[] = [];
      for (const name of names) {
        const forward = [
          ...(await ctx.resolver.resolve4(name).catch(() => [] as string[])),
          ...(await ctx.resolver.resolve6(name).catch(() => [] as string[])),
        ];
        if (forward.some((a) => sameAddress(a, source.address!))) confirmed.push(name.toLowerCase().replace(/\.$/, ''));
      }
      if (confirmed.length === 0) {
        add(
          'ptr',
          subject,
          'fail',
          `the PTR of ${source.address} (${names.join(', ')}) does not resolve back to it`,
          `Publish an A/AAAA record for ${names[0]} pointing at ${source.address}.`,
        );
      } else if (ehlo && !confirmed.includes(ehlo.toLowerCase())) {
        add(
          'ptr',
          subject,
          'warn',
          `the PTR of ${source.address} is ${confirmed.join(', ')} but the source greets as ${ehlo}`,
          `Set the source's ehlo to ${confirmed[0]}, or the PTR to ${ehlo}.`,
        );
      } else add('ptr', subject, 'pass', `${source.address} ⇄ ${confirmed.join(', ')}`);
    }
    for (const zone of ctx.config.dnsblZones) {
      const listed = await blocklisted(ctx.resolver, source.address, zone);
      if (listed === 'failed')
        add('blocklist', `${subject} on ${zone}`, 'warn', `the look-up at ${zone} failed`, CHECK_AGAIN);
      else if (listed)
        add(
          'blocklist',
          `${subject} on ${zone}`,
          'fail',
          `${source.address} is listed on ${zone} (${listed})`,
          `Find why on ${zone}'s site, fix it (a compromised sender, a spam trap hit), then ask for delisting.`,
        );
      else add('blocklist', `${subject} on ${zone}`, 'pass', `${source.address} is not listed on ${zone}`);
    }
    for (const envelope of envelopeDomains) {
      const spf = await evaluateSpf(ctx.resolver, source.address, envelope);
      const where = `SPF of ${envelope} for ${subject}`;
      if (spf.result === 'pass')
        add('spf', where, 'pass', `pass (${spf.reason}; ${spf.lookups} of ${SPF_LOOKUP_LIMIT} look-ups)`);
      else if (spf.result === 'permerror' && spf.reason.includes('DNS look-ups')) {
        add(
          'spf',
          where,
          'fail',
          `permerror: ${spf.reason}`,
          `Shorten the SPF record of ${envelope}: replace includes by the ip4:/ip6: they stand for, to stay within ${SPF_LOOKUP_LIMIT} look-ups.`,
        );
      } else if (spf.result === 'temperror') add('spf', where, 'warn', `temperror: ${spf.reason}`, CHECK_AGAIN);
      else {
        const mechanism = ipaddr.parse(source.address).kind() === 'ipv4' ? 'ip4' : 'ip6';
        const fix =
          spf.result === 'none'
            ? `Publish TXT ${envelope} "v=spf1 ${mechanism}:${source.address} -all".`
            : `Add ${mechanism}:${source.address} to the SPF record of ${envelope}.`;
        add('spf', where, 'fail', `${spf.result}: ${spf.reason}`, fix);
      }
    }
  }
  for (const source of ctx.egress.sources.values()) {
    if (source.kind !== 'relay') continue;
    add(
      'spf',
      `source ${source.name} (relay ${source.host})`,
      'warn',
      'a relay sends from its own addresses, which the doctor cannot see',
      `Include the relay's SPF (as its documentation says) in the SPF record of ${envelopeDomains.join(' and ')}.`,
    );
  }
}

function sameAddress(a: string, b: string): boolean {
  return (
    ipaddr.isValid(a) &&
    ipaddr.isValid(b) &&
    ipaddr.process(a).toNormalizedString() === ipaddr.process(b).toNormalizedString()
  );
}

/** The answer of a DNS blocklist for an address (127.0.0.x), false when not listed, 'failed' when unknown. */
async function blocklisted(resolver: Resolver, address: string, zone: string): Promise<string | false | 'failed'> {
  const parsed = ipaddr.process(address);
  const reversed =
    parsed.kind() === 'ipv4'
      ? parsed.toString().split('.').reverse().join('.')
      : (parsed as ipaddr.IPv6)
          .toByteArray()
          .flatMap((byte) => [byte >> 4, byte & 15])
          .map((nibble) => nibble.toString(16))
          .reverse()
          .join('.');
  try {
    const answers = await resolver.resolve4(`${reversed}.${zone}`);
    // 127.255.255.x is a blocklist's refusal to answer (a public resolver, over quota), not a listing.
    const listings = answers.filter((a) => a.startsWith('127.') && !a.startsWith('127.255.255.'));
    if (listings.length === 0) return answers.length > 0 ? 'failed' : false;
    return listings.join(', ');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOTFOUND' || code === 'ENODATA' ? false : 'failed';
  }
}
