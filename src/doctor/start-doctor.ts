import type { Logger } from '../platform/logger.ts';
import { checkDueDomains, type DoctorContext } from './doctor.ts';

// The doctor's daily round, run where the workers run: every hour it checks the verified domains not
// checked for a day (at most 20 a round, claimed so that two processes never check one twice). A round
// that fails is logged and the next one tries again. A domain is also checked on demand.

export const DOCTOR_ROUND_MS = 3_600_000;
export const DOCTOR_RECHECK_MS = 86_400_000;
export const FIRST_ROUND_DELAY_MS = 60_000;

export interface DoctorRounds {
  stop(): Promise<void>;
}

export function startDoctor(
  context: DoctorContext,
  log: Pick<Logger, 'info' | 'error'>,
  options: { roundMs?: number; firstDelayMs?: number; recheckMs?: number } = {},
): DoctorRounds {
  let stopping = false;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  const round = async () => {
    try {
      const checked = await checkDueDomains({ log, ...context }, options.recheckMs ?? DOCTOR_RECHECK_MS);
      if (checked > 0) log.info({ checked }, 'doctor: domains checked');
    } catch (error) {
      log.error({ err: error }, 'doctor: the round failed; trying again next round');
    }
  };
  const schedule = (delay: number) => {
    timer = setTimeout(() => {
      running = round().finally(() => {
        running = undefined;
        if (!stopping) schedule(options.roundMs ?? DOCTOR_ROUND_MS);
      });
    }, delay);
    timer.unref();
  };
  schedule(options.firstDelayMs ?? FIRST_ROUND_DELAY_MS);
  return {
    async stop() {
      stopping = true;
      clearTimeout(timer);
      await running;
    },
  };
}
