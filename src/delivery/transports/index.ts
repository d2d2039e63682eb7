import type { Config } from '../../platform/config.ts';
import type { Transport } from '../transport.ts';
import { createComposer, defaultComposeThreads } from '../composer.ts';
import { createCaptureTransport } from './capture.ts';
import { createMxTransport } from './mx.ts';
import { createSmtpRelayTransport, type SmtpRelayOptions } from './smtp-relay.ts';

export { readCaptured } from './capture.ts';

export interface TransportOptions {
  /** TLS settings for the `smtp` relay (tests relax certificate checks here; production never needs to). */
  relayTls?: SmtpRelayOptions['tls'];
}

/** The transport MAILROOM_TRANSPORT names; unset, `capture` on embedded PGlite and `mx` on PostgreSQL. */
export function createTransport(config: Config, options: TransportOptions = {}): Transport {
  const kind = config.transport ?? (config.databaseUrl ? 'mx' : 'capture');
  // Messages are composed and signed by MAILROOM_COMPOSE_THREADS threads (composer.ts).
  const composer = createComposer(config.composeThreads ?? defaultComposeThreads());
  switch (kind) {
    case 'capture':
      return createCaptureTransport(config, composer);
    case 'smtp':
      return createSmtpRelayTransport(config, { tls: options.relayTls, composer });
    case 'mx':
      return createMxTransport(config, composer);
  }
}
