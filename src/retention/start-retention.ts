import type { Config } from '../platform/config.ts';
import type { Database } from '../platform/db/database.ts';
import type { Logger } from '../platform/logger.ts';
import { pruneAll, type PruneCounts } from './prune.ts';

// The periodic pruner, run by every process that runs workers. The first round comes shortly after
// start, then one every interval. Several processes pruning at once is safe: each batch skips the rows
// another pruner holds (prune.ts). A failed round is logged and the next one tries again.

export const PRUNE_INTERVAL_MS = 10 * 60_000;
export const FIRST_PRUNE_DELAY_MS = 30_000;

export interface Retention {
  /** Starts no new round, lets the running one stop after its current batch. */
  stop(): Promise<void>;
}

export interface RetentionOptions {
  intervalMs?: number;
  firstDelayMs?: number;
  batchSize?: number;
}

export function startRetention(
  db: Database,
  config: Pick<Config, 'retentionDays' | 'metadataRetentionDays' | 'dataDir'>,
  log: Pick<Logger, 'info' | 'error'>,
  options: RetentionOptions = {},
): Retention {
  let stopping = false;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  const round = async () => {
    try {
      const counts: PruneCounts = await pruneAll(db, {
        retentionDays: config.retentionDays,
        metadataRetentionDays: config.metadataRetentionDays,
        dataDir: config.dataDir,
        batchSize: options.batchSize,
        stopping: () => stopping,
      });
      if (Object.values(counts).some((n) => n > 0)) log.info({ pruned: counts }, 'retention: pruned');
    } catch (error) {
      log.error({ err: error }, 'retention: pruning failed; trying again next round');
    }
  };

  const schedule = (delay: number) => {
    timer = setTimeout(() => {
      running = round().finally(() => {
        running = undefined;
        if (!stopping) schedule(options.intervalMs ?? PRUNE_INTERVAL_MS);
      });
    }, delay);
    timer.unref();
  };
  schedule(options.firstDelayMs ?? FIRST_PRUNE_DELAY_MS);

  return {
    async stop() {
      stopping = true;
      clearTimeout(timer);
      await running;
    },
  };
}
