import { hostname } from 'node:os';
import { publicBaseUrl, type Config } from '../platform/config.ts';
import { dkimRecordName, dkimRecordValue, publishesDkimKey } from './dkim.ts';
import { whyNotPublicHost } from './public-host.ts';

/**
 * Which record a status belongs to (the keys of domains.record_status). SPF is the SPF TXT record,
 * at the return path when the domain has one; ReturnPathMX the return path's MX; Tracking the tracking
 * subdomain's CNAME; ReceivingMX the MX at the domain's own name, when it receives mail. A return path is fixed once a domain is added, so SPF's status never names
 * another place; a changed tracking subdomain drops the Tracking status (domains.ts).
 */
export type RecordKey = 'DKIM' | 'SPF' | 'DMARC' | 'ReturnPathMX' | 'Tracking' | 'ReceivingMX';

/** Resend's name for what a record is for (DomainRecord.record); DMARC is Mailroom's, Resend has none. */
export type RecordKind = 'DKIM' | 'SPF' | 'DMARC' | 'Tracking' | 'Receiving';

export type RecordType = 'TXT' | 'MX' | 'CNAME';

/**
 * not_started: never checked; pending: the last look-up could not tell (timeout, SERVFAIL, refused);
 * verified: found as expected; failed: the name answered without the expected record.
 */
export type RecordStatus = 'not_started' | 'pending' | 'verified' | 'failed';

/** What domains.record_status holds: the result of the last check of each record. */
export type RecordStatuses = Partial<Record<RecordKey, RecordStatus>>;

export interface DnsRecord {
  key: RecordKey;
  record: RecordKind;
  type: RecordType;
  /** Full DNS name the record is published at. */
  name: string;
  value: string;
  /** MX records only. */
  priority?: number;
  /** Required records decide verification; the others only improve deliverability. */
  required: boolean;
  /**
   * Whether what DNS holds at `name` for `type` satisfies this record: the TXT values (chunks joined),
   * the MX hosts, or the CNAME target, host names lower case without their trailing dot.
   */
  isPublished(found: string[]): boolean;
}

export interface DomainKeys {
  name: string;
  dkimSelector: string;
  dkimPublicKey: string;
  /** The return path's label (send → send.example.com); null: the server's MAILROOM_RETURN_PATH_DOMAIN. */
  customReturnPath: string | null;
  /** The tracking subdomain's label; null: tracking links point at MAILROOM_PUBLIC_URL. */
  trackingSubdomain: string | null;
  /** Whether the domain receives mail (its capabilities.receiving); left out: it does not. */
  receiving?: boolean;
}

/** Where a domain's return-path MX and tracking CNAME point: hosts of this installation (recordHosts). */
export interface RecordHosts {
  /** The host the inbound listener is reached at (bounce reports, and mail for receiving domains). */
  inbound: string;
  /** The host of MAILROOM_PUBLIC_URL. */
  tracking: string;
}

export type RecordHostsConfig = Pick<Config, 'mxHost' | 'heloName' | 'publicUrl' | 'host' | 'port'>;

/**
 * The hosts of this installation that records point at. The inbound listener runs in the API processes
 * (the ones that answer with these records), so its host is theirs: MAILROOM_MX_HOST, else
 * MAILROOM_HELO_NAME (which should be the host's public name, matching its PTR), else the host of
 * MAILROOM_PUBLIC_URL when that is a public name, else the machine's host name. A value that is not a
 * public name is still shown, with a warning (domain-view.ts).
 */
export function recordHosts(config: RecordHostsConfig): RecordHosts {
  const tracking = new URL(publicBaseUrl(config)).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const publicUrlHost =
    config.publicUrl !== undefined && whyNotPublicHost(tracking) === undefined ? tracking : undefined;
  return {
    inbound: (config.mxHost ?? config.heloName ?? publicUrlHost ?? hostname()).toLowerCase().replace(/\.$/, ''),
    tracking,
  };
}

/** Resend's priority for the return path's MX (the only MX there), and for the Receiving MX. */
const RETURN_PATH_MX_PRIORITY = 10;
const RECEIVING_MX_PRIORITY = 10;

export const SUGGESTED_SPF = 'v=spf1 a mx ~all';
export const SUGGESTED_DMARC = 'v=DMARC1; p=none;';

const SPF_VERSION = /^v=spf1(\s|$)/i;
const DMARC_VERSION = /^v=DMARC1\s*(;|$)/i;

/** The records an organization publishes for a domain, in the order they are shown. */
export function recordsToPublish(domain: DomainKeys, hosts: RecordHosts): DnsRecord[] {
  const returnPath = domain.customReturnPath === null ? null : `${domain.customReturnPath}.${domain.name}`;
  const records: DnsRecord[] = [
    {
      key: 'DKIM',
      record: 'DKIM',
      type: 'TXT',
      name: dkimRecordName(domain.dkimSelector, domain.name),
      value: dkimRecordValue(domain.dkimPublicKey),
      required: true,
      isPublished: (txts) => txts.some((txt) => publishesDkimKey(txt, domain.dkimPublicKey)),
    },
  ];
  if (returnPath !== null) {
    // Resend's return-path pair, both under its SPF kind: the MX that brings bounces back, and SPF there.
    records.push({
      key: 'ReturnPathMX',
      record: 'SPF',
      type: 'MX',
      name: returnPath,
      value: hosts.inbound,
      priority: RETURN_PATH_MX_PRIORITY,
      required: false,
      isPublished: (exchanges) => exchanges.includes(hosts.inbound),
    });
  }
  records.push({
    key: 'SPF',
    record: 'SPF',
    type: 'TXT',
    // SPF is checked against the MAIL FROM's domain: the return path when the domain has one.
    name: returnPath ?? domain.name,
    value: SUGGESTED_SPF,
    required: false,
    // Any policy of the owner's is accepted; two SPF records are a permerror (RFC 7208 §4.5).
    isPublished: (txts) => txts.filter((txt) => SPF_VERSION.test(txt)).length === 1,
  });
  if (domain.receiving === true) {
    // Resend's Receiving record: mail for the domain's addresses goes to the inbound listener. It counts
    // as published when the listener's host is among the name's exchanges; whether a better-placed MX
    // (a mailbox provider's) takes the mail first is the doctor's finding (doctor/doctor.ts).
    records.push({
      key: 'ReceivingMX',
      record: 'Receiving',
      type: 'MX',
      name: domain.name,
      value: hosts.inbound,
      priority: RECEIVING_MX_PRIORITY,
      required: false,
      isPublished: (exchanges) => exchanges.includes(hosts.inbound),
    });
  }
  if (domain.trackingSubdomain !== null) {
    records.push({
      key: 'Tracking',
      record: 'Tracking',
      type: 'CNAME',
      name: `${domain.trackingSubdomain}.${domain.name}`,
      value: hosts.tracking,
      required: false,
      isPublished: (targets) => targets.includes(hosts.tracking),
    });
  }
  records.push({
    key: 'DMARC',
    record: 'DMARC',
    type: 'TXT',
    name: `_dmarc.${domain.name}`,
    value: SUGGESTED_DMARC,
    required: false,
    // Likewise: more than one DMARC record means receivers apply none (RFC 7489 §6.6.3).
    isPublished: (txts) => txts.filter((txt) => DMARC_VERSION.test(txt)).length === 1,
  });
  return records;
}
