import { dmarcAddress } from '../domains/dmarc-address.ts';
import { CHECK_AGAIN, txtRecords, type AddFinding, type DoctorContext, type DomainRow } from './findings.ts';

// The domain's own authentication records: DKIM (the key published is the one Mailroom signs with) and
// DMARC (one record, the domain's or its organizational domain's, and aggregate reports sent to Mailroom).

/** The dkim and dmarc findings of the domain. */
export async function checkDomainRecords(ctx: DoctorContext, domain: DomainRow, add: AddFinding): Promise<void> {
  const txt = (name: string) => txtRecords(ctx.resolver, name);

  // DKIM: the published key is the one Mailroom signs with.
  const dkimName = `${domain.dkim_selector}._domainkey.${domain.name}`;
  const dkimRecord = `v=DKIM1; k=rsa; p=${domain.dkim_public_key}`;
  const dkim = await txt(dkimName);
  if (dkim === 'failed') add('dkim', domain.name, 'warn', `the DNS look-up of ${dkimName} failed`, CHECK_AGAIN);
  else {
    const keys = dkim.map((record) => /(?:^|;)\s*p=([^;]*)/.exec(record)?.[1]?.replace(/\s+/g, '')).filter(Boolean);
    if (keys.length === 0) {
      add('dkim', domain.name, 'fail', `no DKIM key at ${dkimName}`, `Publish TXT ${dkimName} "${dkimRecord}".`);
    } else if (!keys.includes(domain.dkim_public_key)) {
      add(
        'dkim',
        domain.name,
        'fail',
        `the key at ${dkimName} is not the one Mailroom signs with`,
        `Replace it: TXT ${dkimName} "${dkimRecord}".`,
      );
    } else
      add('dkim', domain.name, 'pass', `${dkimName} publishes the key Mailroom signs with (d=${domain.name}, aligned)`);
  }

  // DMARC: present, and where its aggregate reports go.
  const rua =
    ctx.config.returnPathDomain === undefined ? undefined : `mailto:${dmarcAddress(ctx.config.returnPathDomain)}`;
  let dmarcName = `_dmarc.${domain.name}`;
  let dmarc = await txt(dmarcName);
  const suggested = `v=DMARC1; p=none${rua ? `; rua=${rua}` : ''}`;
  const isDmarc = (r: string) => /^v=DMARC1\s*(;|$)/i.test(r);
  // A subdomain without a record of its own is covered by its organizational domain's (RFC 7489 §6.6.3;
  // taken here as the last two labels, without the public suffix list).
  const parent = domain.name.split('.').slice(-2).join('.');
  if (dmarc !== 'failed' && !dmarc.some(isDmarc) && parent !== domain.name) {
    const inherited = await txt(`_dmarc.${parent}`);
    if (inherited !== 'failed' && inherited.some(isDmarc)) [dmarcName, dmarc] = [`_dmarc.${parent}`, inherited];
  }
  if (dmarc === 'failed') add('dmarc', domain.name, 'warn', `the DNS look-up of ${dmarcName} failed`, CHECK_AGAIN);
  else {
    const records = dmarc.filter(isDmarc);
    const record = records[0];
    if (records.length > 1) {
      add(
        'dmarc',
        domain.name,
        'fail',
        `${dmarcName} has ${records.length} DMARC records: receivers then apply none`,
        `Keep one record at ${dmarcName}.`,
      );
    } else if (!record) {
      add(
        'dmarc',
        domain.name,
        'fail',
        `no DMARC record at ${dmarcName}: Gmail, Yahoo and Microsoft refuse bulk mail without one`,
        `Publish TXT ${dmarcName} "${suggested}".`,
      );
    } else if (rua && !record.toLowerCase().includes(rua.toLowerCase())) {
      add(
        'dmarc',
        domain.name,
        'warn',
        `${dmarcName} sends no aggregate reports to Mailroom`,
        `Add rua=${rua} to ${dmarcName} ("${record}") to see who sends as ${domain.name}.`,
      );
    } else add('dmarc', domain.name, 'pass', `${dmarcName}: ${record}`);
  }
}
