import { Type, type Static } from 'typebox';
import { ServiceError } from '../platform/errors.ts';

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
// - capabilities: sending is enabled for every domain; receiving is not available yet. Resend requires
//   at least one capability enabled, so sending cannot be disabled while receiving cannot be enabled.
// - custom_return_path: every copy's return path is a VERP address at the operator's
//   MAILROOM_RETURN_PATH_DOMAIN, where bounces are read; a return-path subdomain per domain is refused.
// - tracking_subdomain: tracking links point at MAILROOM_PUBLIC_URL; a tracking subdomain per domain is
//   refused.

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
  tracking_subdomain: Type.Optional(Type.String({ maxLength: 253 })),
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

/** What every domain reads as: sending on, receiving not available. */
export const DOMAIN_CAPABILITIES = { sending: 'enabled', receiving: 'disabled' } as const;

/** Refuses, naming the field, any option whose value Mailroom cannot honour. */
export function refuseUnsupportedOptions(options: NewDomainOptions | DomainSettings): void {
  const refuse = (field: string, message: string) => {
    throw new ServiceError('validation_error', message, field);
  };
  if (options.capabilities?.receiving === 'enabled') {
    refuse('capabilities.receiving', 'Receiving is not available yet: capabilities.receiving can only be disabled');
  }
  if (options.capabilities?.sending === 'disabled') {
    refuse(
      'capabilities.sending',
      'At least one capability must be enabled, and receiving is not available yet: capabilities.sending must stay enabled',
    );
  }
  if ('custom_return_path' in options && options.custom_return_path !== undefined) {
    refuse(
      'custom_return_path',
      "custom_return_path is not supported: every message's return path is at the server's return-path domain (MAILROOM_RETURN_PATH_DOMAIN), where bounces are read",
    );
  }
  if (options.tracking_subdomain !== undefined) {
    refuse(
      'tracking_subdomain',
      "tracking_subdomain is not supported: tracking links point at the server's public URL (MAILROOM_PUBLIC_URL)",
    );
  }
}
