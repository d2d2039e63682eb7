import { dkimRecordName, dkimRecordValue, publishesDkimKey } from './dkim.ts';

export type RecordKind = 'DKIM' | 'SPF' | 'DMARC';

/**
 * not_started: never checked; pending: the last look-up could not tell (timeout, SERVFAIL, refused);
 * verified: found as expected; failed: the name answered without the expected record.
 */
export type RecordStatus = 'not_started' | 'pending' | 'verified' | 'failed';

/** What domains.record_status holds: the result of the last check of each record. */
export type RecordStatuses = Partial<Record<RecordKind, RecordStatus>>;

export interface DnsRecord {
  record: RecordKind;
  /** Full DNS name the TXT record is published at. */
  name: string;
  value: string;
  /** Required records decide verification; the others only improve deliverability. */
  required: boolean;
  /** Whether the TXT records found at `name` (chunks joined) satisfy this record. */
  isPublished(txts: string[]): boolean;
}

export interface DomainKeys {
  name: string;
  dkimSelector: string;
  dkimPublicKey: string;
}

export const SUGGESTED_SPF = 'v=spf1 a mx ~all';
export const SUGGESTED_DMARC = 'v=DMARC1; p=none;';

const SPF_VERSION = /^v=spf1(\s|$)/i;
const DMARC_VERSION = /^v=DMARC1\s*(;|$)/i;

/** The records an organization publishes for a domain, in the order they are shown. */
export function recordsToPublish(domain: DomainKeys): DnsRecord[] {
  return [
    {
      record: 'DKIM',
      name: dkimRecordName(domain.dkimSelector, domain.name),
      value: dkimRecordValue(domain.dkimPublicKey),
      required: true,
      isPublished: (txts) => txts.some((txt) => publishesDkimKey(txt, domain.dkimPublicKey)),
    },
    {
      record: 'SPF',
      name: domain.name,
      value: SUGGESTED_SPF,
      required: false,
      // Any policy of the owner's is accepted; two SPF records are a permerror (RFC 7208 §4.5).
      isPublished: (txts) => txts.filter((txt) => SPF_VERSION.test(txt)).length === 1,
    },
    {
      record: 'DMARC',
      name: `_dmarc.${domain.name}`,
      value: SUGGESTED_DMARC,
      required: false,
      // Likewise: more than one DMARC record means receivers apply none (RFC 7489 §6.6.3).
      isPublished: (txts) => txts.filter((txt) => DMARC_VERSION.test(txt)).length === 1,
    },
  ];
}
