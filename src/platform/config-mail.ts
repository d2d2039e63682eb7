// The settings of mail going out and coming in: DNS, DKIM, the transport and its SMTP, MX and MTA-STS
// ports, TLS and blocklists, the receiving server and its spam check. Part of the one table of settings
// (config.ts), in its order.

import {
  setting,
  integer,
  optionalInteger,
  optionalText,
  optionalDecimal,
  optionalOneOf,
  optionalUrl,
  optionalDomainName,
  domainList,
  dnsLabel,
  dnsServerList,
} from './config-parsers.ts';

export const MAIL_SETTINGS = {
  dnsServers: setting(
    'MAILROOM_DNS_SERVERS',
    undefined,
    'Comma-separated DNS servers (`ip` or `ip:port`, IPv6 as `[ip]:port`) for domain verification, MX look-ups and webhook hosts. Unset: the system resolver.',
    dnsServerList,
  ),
  dnsTimeoutMs: setting(
    'MAILROOM_DNS_TIMEOUT_MS',
    '5000',
    'Time allowed for one DNS look-up (domain verification, MX, webhook hosts).',
    integer(100, 60_000),
  ),
  dkimSelector: setting(
    'MAILROOM_DKIM_SELECTOR',
    'mailroom',
    'DKIM selector of newly added domains: their key is published at `<selector>._domainkey.<domain>`.',
    dnsLabel,
  ),
  transport: setting(
    'MAILROOM_TRANSPORT',
    undefined,
    "How mail leaves: `capture` (stored as .eml under `MAILROOM_DATA_DIR/captured`, outcome delivered), `smtp` (a relay at `MAILROOM_SMTP_URL`) or `mx` (straight to each recipient domain's MX). Unset: `capture` on PGlite, `mx` on PostgreSQL.",
    optionalOneOf(['capture', 'smtp', 'mx'] as const),
  ),
  smtpUrl: setting(
    'MAILROOM_SMTP_URL',
    undefined,
    'The relay for the `smtp` transport: `smtp://user:pass@host:587` (STARTTLS when offered) or `smtps://…:465`.',
    optionalUrl(['smtp:', 'smtps:']),
  ),
  mxPort: setting(
    'MAILROOM_MX_PORT',
    '25',
    'Port the `mx` transport connects to on each MX host (25 on the Internet; tests use a loopback port).',
    integer(1, 65535),
  ),
  mtaStsPort: setting(
    'MAILROOM_MTA_STS_PORT',
    '443',
    'Port of the HTTPS servers MTA-STS policies are fetched from (`https://mta-sts.<domain>/.well-known/mta-sts.txt`); 443 on the Internet, tests use a loopback port.',
    integer(1, 65535),
  ),
  extraCaFile: setting(
    'MAILROOM_EXTRA_CA_FILE',
    undefined,
    "PEM certificates trusted besides the system's when a certificate is checked on delivery: MTA-STS policy fetches, and MX hosts of MTA-STS `enforce` and TLS-required domains (a private CA, or a test one).",
    optionalText,
  ),
  tlsRequiredDomains: setting(
    'MAILROOM_TLS_REQUIRED_DOMAINS',
    undefined,
    'Comma-separated recipient domains whose mail goes only over TLS with a certificate valid for the MX host, whatever they publish (as with an MTA-STS `enforce` policy naming every MX); otherwise the recipient is deferred. Unset: none.',
    domainList,
  ),
  dnsblZones: setting(
    'MAILROOM_DNSBL_ZONES',
    'zen.spamhaus.org,bl.spamcop.net,b.barracudacentral.org',
    "Comma-separated DNS blocklists the deliverability doctor looks each source address up on. Spamhaus answers only resolvers it knows: point `MAILROOM_DNS_SERVERS` at your own resolver (or use Spamhaus's DQS zone). Empty: none.",
    domainList,
  ),
  heloName: setting(
    'MAILROOM_HELO_NAME',
    undefined,
    "Host name Mailroom gives in EHLO. Unset: the machine's host name.",
    optionalText,
  ),
  mxHost: setting(
    'MAILROOM_MX_HOST',
    undefined,
    "Public host name of the inbound listener: the value of the MX records a domain's owner publishes (a receiving domain's, a custom return path's). Unset: `MAILROOM_HELO_NAME`, else the host of `MAILROOM_PUBLIC_URL` when that is a public name, else the machine's host name. A value that is not a public, fully qualified name is shown with a warning.",
    optionalDomainName,
  ),
  smtpTimeoutMs: setting(
    'MAILROOM_SMTP_TIMEOUT_MS',
    '30000',
    'Time allowed for connecting to an SMTP server and for each of its answers.',
    integer(100, 600_000),
  ),
  returnPathDomain: setting(
    'MAILROOM_RETURN_PATH_DOMAIN',
    undefined,
    'Domain of the per-recipient return path (VERP, `bounce-<message>-<recipient>-<signature>@<domain>`) that bounce reports come back to; its MX must reach the inbound listener. Unset: the return path is the From address and later bounces are not seen.',
    optionalDomainName,
  ),
  inboundPort: setting(
    'MAILROOM_INBOUND_PORT',
    undefined,
    'Port of the inbound SMTP listener (the MX of the return-path domain and of receiving domains: bounce reports, complaints, DMARC reports and received mail), on `HOST`; 25 on the Internet. Unset: no listener.',
    optionalInteger(1, 65535),
  ),
  inboundMaxBytes: setting(
    'MAILROOM_INBOUND_MAX_BYTES',
    '41943040',
    'Largest message the inbound listener takes (40 MiB by default), advertised in EHLO (SIZE) and enforced while the message arrives: a larger one is refused (552) and nothing of it is kept.',
    integer(1024, 1024 * 1024 * 1024),
  ),
  rspamdUrl: setting(
    'MAILROOM_RSPAMD_URL',
    undefined,
    'Base URL of an rspamd scanner (its normal worker or controller, e.g. `http://127.0.0.1:11333`) that scores each received message (`POST /checkv2`). Unset: received mail is not scanned.',
    optionalUrl(['http:', 'https:']),
  ),
  spamQuarantineScore: setting(
    'MAILROOM_SPAM_QUARANTINE_SCORE',
    undefined,
    "rspamd score at or over which a received message is quarantined (stored, but left out of lists and not announced). Unset: quarantined when rspamd's own action is `reject` (its reject threshold, 15 by default).",
    optionalDecimal,
  ),
  spamCheckTimeoutMs: setting(
    'MAILROOM_SPAM_CHECK_TIMEOUT_MS',
    '5000',
    'Time rspamd has to answer for one received message; past it (or when rspamd cannot be reached) the message is stored unscanned, never refused.',
    integer(100, 60_000),
  ),
};
