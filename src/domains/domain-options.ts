import { Type, type Static } from 'typebox';
import { ServiceError } from '../platform/errors.ts';
import { isHostLabel } from '../platform/domain-name.ts';

// The options Resend takes when a domain is added (POST /domains) or changed (PATCH /domains/:id).
// Mailroom accepts every one of them, honours what it can, and refuses with a 400 naming the field a
// value it cannot honour, so that nothing asked for is silently dropped:
// - region: any of Resend's four is accepted, stored and answered back (default us-east-1), so that code
//   written for Resend and dashboards that show it keep working. It changes nothing: Mailroom sends from
//   the servers it runs on, whatever the region says.
// - open_tracking, click_tracking: honoured (the domain's own switches, domains.ts).
// - tls: honoured per domain (stored, default 'opportunistic': STARTTLS when the receiving server offers
//   it). 'enforced': the domain's messages are never sent in the clear, on every transport: a server
//   without STARTTLS, or a failed handshake, defers the copy (then fails it, as retries run out) instead
//   (delivery/transports/mx.ts, smtp-relay.ts).
// - capabilities.receiving: honoured (domains.receiving): enabled, the inbound listener takes mail for
//   the domain's addresses, and its records add Resend's Receiving MX (domain-records.ts). One name
//   receives for one organization only: the listener finds the organization by the recipient's domain.
// - capabilities.sending: Mailroom sends from every domain it holds, so 'disabled' is refused rather
//   than stored and ignored; a receive-only domain is one whose mail the organization does not send.
// - custom_return_path (POST only, as Resend): one lower-case DNS label. The domain's copies leave with
//   their VERP return path at <label>.<domain> (so SPF aligns with the From domain for DMARC), whose MX
//   must reach the inbound listener; the domain's records say so (domain-records.ts). Fixed once added.
// - tracking_subdomain (POST and PATCH): one lower-case DNS label. The domain's open pixel and tracked
//   links point at <label>.<domain>, a CNAME to MAILROOM_PUBLIC_URL's host; null on PATCH removes it.
//   It cannot be the return path's label: a CNAME cannot share its name with the return path's MX.
// - reply_tracking (Mailroom's own, POST and PATCH): the domain's messages carry a signed reply address
//   (reply+<token>@<domain>, emails/reply-address.ts) as Reply-To unless the send gives a reply_to; a
//   send's own reply_tracking overrides it. Replies reach Mailroom only when the domain receives mail.

export const RESEND_REGIONS = ['us-east-1', 'eu-west-1', 'sa-east-1', 'ap-northeast-1'] as const;
export type DomainRegion = (typeof RESEND_REGIONS)[number];
/** Resend's default region, and what a domain added without one (or before regions were kept) reads. */
export const DEFAULT_REGION: DomainRegion = 'us-east-1';

export const TLS_MODES = ['opportunistic', 'enforced'] as const;
export type DomainTls = (typeof TLS_MODES)[number];

const Capability = Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]);

/** A tracking switch: true or false overrides the organization's, null follows it again. */
const TrackingSwitch = Type.Optional(Type.Union([Type.Boolean(), Type.Null()]));

/** What PATCH /domains/:id takes (Resend's UpdateDomainOptions). */
export const DomainSettingsSchema = {
  open_tracking: TrackingSwitch,
  click_tracking: TrackingSwitch,
  tls: Type.Optional(Type.Union(TLS_MODES.map((mode) => Type.Literal(mode)))),
  capabilities: Type.Optional(
    Type.Object(
      { sending: Type.Optional(Capability), receiving: Type.Optional(Capability) },
      { additionalProperties: false },
    ),
  ),
  // The label's rules live in subdomainLabel, so that a bad one is refused naming the field with why.
  tracking_subdomain: Type.Optional(Type.Union([Type.String({ maxLength: 253 }), Type.Null()])),
  reply_tracking: Type.Optional(
    Type.Boolean({
      description:
        "Mailroom's own: messages from the domain carry a signed reply address as Reply-To (when the send gives none), so replies come back tied to them. Default false.",
    }),
  ),
};

/** What POST /domains takes (Resend's CreateDomainRequest). */
export const NewDomainSchema = {
  // The name's rules live in normalizeDomainName (the CLI shares them); the bound only keeps junk out.
  name: Type.String({ maxLength: 1024 }),
  region: Type.Optional(Type.Union(RESEND_REGIONS.map((region) => Type.Literal(region)))),
  custom_return_path: Type.Optional(Type.String({ maxLength: 253 })),
  ...DomainSettingsSchema,
};

/** Resend's SDKs send only the options given, so an empty update is valid and changes nothing. */
export const DomainSettingsBody = Type.Object(DomainSettingsSchema, { additionalProperties: false });
export type DomainSettings = Static<typeof DomainSettingsBody>;
export const NewDomainBody = Type.Object(NewDomainSchema, { additionalProperties: false });
export type NewDomainOptions = Omit<Static<typeof NewDomainBody>, 'name'>;

export type CapabilityStatus = 'enabled' | 'disabled';

/** Resend's capabilities of a domain: sending is always on; receiving is the domain's switch. */
export interface DomainCapabilities {
  sending: 'enabled';
  receiving: CapabilityStatus;
}

export const domainCapabilities = (receiving: boolean): DomainCapabilities => ({
  sending: 'enabled',
  receiving: receiving ? 'enabled' : 'disabled',
});

/** The receiving switch asked for: true or false, undefined when the options leave it as it is. */
export const receivingAskedFor = (options: NewDomainOptions | DomainSettings): boolean | undefined =>
  options.capabilities?.receiving === undefined ? undefined : options.capabilities.receiving === 'enabled';

/** Refuses, naming the field, any option whose value Mailroom cannot honour. */
export function refuseUnsupportedOptions(options: NewDomainOptions | DomainSettings): void {
  const refuse = (field: string, message: string) => {
    throw new ServiceError('validation_error', message, field);
  };
  if (options.capabilities?.sending === 'disabled') {
    refuse(
      'capabilities.sending',
      'Mailroom sends from every domain it holds: capabilities.sending must stay enabled (receiving can be enabled alongside it)',
    );
  }
  const returnPath =
    'custom_return_path' in options && options.custom_return_path !== undefined
      ? subdomainLabel('custom_return_path', options.custom_return_path)
      : undefined;
  const tracking =
    typeof options.tracking_subdomain === 'string'
      ? subdomainLabel('tracking_subdomain', options.tracking_subdomain)
      : undefined;
  if (returnPath !== undefined && returnPath === tracking) {
    refuse(
      'tracking_subdomain',
      'tracking_subdomain cannot be the custom_return_path: a CNAME record cannot share its name with the MX record',
    );
  }
}

/** The value as a subdomain label of the domain's name; 400 naming `field` when it is not one. */
export function subdomainLabel(field: string, value: string): string {
  // One label of a host name, lower case (the stored form; no silent rewriting): 'send' for send.example.com.
  if (!isHostLabel(value)) {
    throw new ServiceError(
      'validation_error',
      `${field} must be one lower-case DNS label (letters, digits and inner hyphens, at most 63), such as "send" for send.<domain>; got "${value}"`,
      field,
    );
  }
  return value;
}
