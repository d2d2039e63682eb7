import { ServiceError } from '../platform/errors.ts';

// Durations as automations write them: "30 minutes", "1 hour", "2 days", "1 day 12 hours", "90s".
// A delay or a wait's timeout runs from one second to MAX_DURATION_MS.

const UNIT_MS: Record<string, number> = {
  s: 1000,
  sec: 1000,
  secs: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hrs: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
  w: 604_800_000,
  week: 604_800_000,
  weeks: 604_800_000,
};

export const MIN_DURATION_MS = 1000;
/** The longest delay or timeout: 30 days. */
export const MAX_DURATION_MS = 30 * 86_400_000;

const PART = /(\d+)\s*([a-z]+)/gy;

/** Milliseconds in `text`, or undefined when it is not a duration this file reads. */
export function parseDuration(text: string): number | undefined {
  const source = text.trim().toLowerCase();
  if (source === '') return undefined;
  let total = 0;
  let at = 0;
  PART.lastIndex = 0;
  while (at < source.length) {
    PART.lastIndex = at;
    const match = PART.exec(source);
    if (!match) return undefined;
    const unit = UNIT_MS[match[2]!];
    if (unit === undefined) return undefined;
    total += Number(match[1]) * unit;
    at = PART.lastIndex;
    while (source[at] === ' ' || source[at] === ',') at++;
    if (source.startsWith('and ', at)) at += 4;
  }
  return total;
}

/** The duration in `text`, checked to lie within the limits; a 400 naming `field` otherwise. */
export function checkedDuration(text: unknown, field: string): number {
  const ms = typeof text === 'string' ? parseDuration(text) : undefined;
  if (ms === undefined) {
    throw new ServiceError(
      'validation_error',
      `${field}: not a duration: give a number and a unit, e.g. "30 minutes", "1 hour", "2 days"`,
      field,
    );
  }
  if (ms < MIN_DURATION_MS || ms > MAX_DURATION_MS) {
    throw new ServiceError('validation_error', `${field}: must be between 1 second and 30 days`, field);
  }
  return ms;
}
