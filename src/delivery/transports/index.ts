import { ConfigError, type Config } from '../../platform/config.ts';
import type { Database } from '../../platform/db/database.ts';
import type { Logger } from '../../platform/logger.ts';
import { isLocalAddress } from '../../platform/network-address.ts';
import { createShaper, type ShaperOptions } from '../../shaping/shaper.ts';
import { loadShapingFile, type ShapingPolicy } from '../../shaping/shaping-file.ts';
import { createSiteResolver } from '../../shaping/sites.ts';
import type { Transport } from '../transport.ts';
import { createComposer, defaultComposeThreads } from '../composer.ts';
import { createCaptureTransport } from './capture.ts';
import { createMxTransport } from './mx.ts';
import { createMxResolver, createMxTtlLookup } from './mx-lookup.ts';
import { createMtaSts } from './mta-sts.ts';
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
      limitsFor: (site, source) => policy.limitsFor(site, source),
      holds: policy.holds,
      rules: policy.rules,
      log: options.log ?? { warn: () => {} },
      ...options.shaping,
    });
  switch (kind) {
    case 'capture':
      return createCaptureTransport(config, composer);
    case 'smtp':
      if (policy.egress.declared) {
        throw new ConfigError(
          'MAILROOM_TRANSPORT',
          'is smtp, but the shaping file declares egress sources: set it to mx and declare the relay as a source (relay = "smtp://…")',
        );
      }
      return createSmtpRelayTransport(config, { tls: options.relayTls, composer, shaper: shaper() });
    case 'mx': {
      checkSourceAddresses(policy);
      const sites = createSiteResolver({ lookupMx: createMxTtlLookup(config), extraSuffixes: policy.mxSuffixes });
      const mtaSts = createMtaSts(config, {
        resolver: createMxResolver(config),
        db,
        now: options.shaping?.now,
        log: options.log,
      });
      return createMxTransport(config, {
        composer,
        shaper: shaper(),
        sites,
        egress: policy.egress,
        relayTls: options.relayTls,
        mtaSts,
      });
    }
  }
}

/** Every address source's address is this host's: a typo would otherwise defer every message of the source. */
function checkSourceAddresses(policy: ShapingPolicy): void {
  for (const source of policy.egress.sources.values()) {
    if (source.kind !== 'address' || source.address === undefined || isLocalAddress(source.address)) continue;
    throw new ConfigError(
      'MAILROOM_SHAPING_FILE',
      `source.${source.name}.address: ${source.address} is not an address of this host, so no connection can be made from it`,
    );
  }
}
