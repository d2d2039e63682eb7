import type { Config } from '../../platform/config.ts';
import type { Database } from '../../platform/db/database.ts';
import type { Logger } from '../../platform/logger.ts';
import { createShaper, type ShaperOptions } from '../../shaping/shaper.ts';
import { loadShapingFile, type ShapingPolicy } from '../../shaping/shaping-file.ts';
import { createSiteResolver } from '../../shaping/sites.ts';
import type { Transport } from '../transport.ts';
import { createComposer, defaultComposeThreads } from '../composer.ts';
import { createCaptureTransport } from './capture.ts';
import { createMxTransport } from './mx.ts';
import { createMxTtlLookup } from './mx-lookup.ts';
import { createSmtpRelayTransport, type SmtpRelayOptions } from './smtp-relay.ts';

export { readCaptured } from './capture.ts';

export interface TransportOptions {
  /** TLS settings for the `smtp` relay (tests relax certificate checks here; production never needs to). */
  relayTls?: SmtpRelayOptions['tls'];
  /** The shaping policy (default: MAILROOM_SHAPING_FILE, read now). */
  policy?: ShapingPolicy;
  /** Shaping's timings and clock (tests). */
  shaping?: Partial<Pick<ShaperOptions, 'now' | 'leaseMs' | 'waitMs' | 'maxInlineWaitMs' | 'idleMs'>>;
  log?: Pick<Logger, 'warn'>;
}

/** The transport MAILROOM_TRANSPORT names; unset, `capture` on embedded PGlite and `mx` on PostgreSQL. */
export function createTransport(config: Config, db: Database, options: TransportOptions = {}): Transport {
  const kind = config.transport ?? (config.databaseUrl ? 'mx' : 'capture');
  // A shaping file with a mistake stops the start here, with the key at fault named.
  const policy = options.policy ?? loadShapingFile(config.shapingFile);
  // Messages are composed and signed by MAILROOM_COMPOSE_THREADS threads (composer.ts).
  const composer = createComposer(config.composeThreads ?? defaultComposeThreads());
  const shaper = () =>
    createShaper({
      db,
      limitsFor: (site) => policy.limitsFor(site),
      holds: policy.holds,
      rules: policy.rules,
      log: options.log ?? { warn: () => {} },
      ...options.shaping,
    });
  switch (kind) {
    case 'capture':
      return createCaptureTransport(config, composer);
    case 'smtp':
      return createSmtpRelayTransport(config, { tls: options.relayTls, composer, shaper: shaper() });
    case 'mx': {
      const sites = createSiteResolver({ lookupMx: createMxTtlLookup(config), extraSuffixes: policy.mxSuffixes });
      return createMxTransport(config, { composer, shaper: shaper(), sites });
    }
  }
}
