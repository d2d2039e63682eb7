import { ServiceError } from '../platform/errors.ts';
import { canonicalTimeZone, zoneOffsetMinutes } from '../platform/time-zones.ts';

// `scheduled_at` (POST /emails, batch entries, PATCH /emails/:id): an ISO 8601 timestamp with an offset,
// or one of a few plain-English forms, as Resend accepts ("in 1 min", "tomorrow at 9am", "Friday at 3pm
// ET"). The English forms are a small fixed grammar (docs/sending.md), not a guess: anything outside it,
// or that could mean two different times ("at 9", "next Friday"), is refused with the forms that work.
//
//   in <N|a|an> <unit>                      units: second(s), sec(s), minute(s), min(s), hour(s), hr(s), day(s), week(s)
//   <day> [at] <time> [<zone>]              day: today, tomorrow, monday … sunday
//   time: 9am, 9 am, 9:30pm, 12pm (noon), 12am (midnight), 21:00, 09:05, noon, midnight
//   zone: UTC, GMT, Z, +02:00, -0500, UTC+2, ET, CT, MT, PT, EST, EDT, CST, CDT, MST, MDT, PST, PDT, or an
//         IANA name (Europe/Paris); UTC when none is given
//
// A weekday is its next occurrence at that time: "friday at 3pm" on a Friday morning is that afternoon,
// on a Friday evening a week later. A wall time that a clock change skips is refused; one it repeats is
// the first of the two.

const ISO_8601_WITH_OFFSET =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):?(\d{2}))$/i;

const FORMS =
  'an ISO 8601 timestamp with an offset (2026-12-01T09:00:00Z), "in <number> minutes|hours|days|weeks" ' +
  '(also "in an hour"), or "today|tomorrow|<weekday> at <time> [<zone>]" (e.g. "tomorrow at 9am", "friday at 15:30 Europe/Paris"; UTC unless a zone is given)';

const UNIT_MS: Record<string, number> = {
  second: 1000,
  sec: 1000,
  minute: 60_000,
  min: 60_000,
  hour: 3_600_000,
  hr: 3_600_000,
  day: 86_400_000,
  week: 604_800_000,
};
const RELATIVE = /^in (\d{1,6}|an?) (second|sec|minute|min|hour|hr|day|week)s?$/;
const WEEKDAYS = ['sunday', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday'];
const CALENDAR = new RegExp(`^(today|tomorrow|${WEEKDAYS.join('|')})(?: at)? (.+?)$`);
const TWELVE_HOUR = /^(\d{1,2})(?::(\d{2}))? ?(am|pm)$/;
const TWENTY_FOUR_HOUR = /^(\d{1,2}):(\d{2})$/;
/** The time part, then an optional zone (the zone may itself contain spaces: "utc +2" is not accepted). */
const TIME_AND_ZONE = /^(\d{1,2}(?::\d{2})? ?(?:am|pm)|\d{1,2}:\d{2}|noon|midnight)(?: (\S+))?$/;

/** Zones named by North American abbreviation: the region's rules (ET is EST or EDT by date). */
const REGION_ZONES: Record<string, string> = {
  et: 'America/New_York',
  ct: 'America/Chicago',
  mt: 'America/Denver',
  pt: 'America/Los_Angeles',
};
/** Fixed offsets, in minutes east of UTC. */
const FIXED_ZONES: Record<string, number> = {
  utc: 0,
  gmt: 0,
  z: 0,
  est: -300,
  edt: -240,
  cst: -360,
  cdt: -300,
  mst: -420,
  mdt: -360,
  pst: -480,
  pdt: -420,
};
const OFFSET = /^(?:utc|gmt)?([+-])(\d{1,2})(?::?(\d{2}))?$/;

/** The latest instant accepted: ISO 8601's four-digit years, and far inside what PostgreSQL stores. */
const LATEST = Date.UTC(9999, 11, 31, 23, 59, 59);

/** What the API schema says of the field (OpenAPI description). */
export const SCHEDULED_AT_DESCRIPTION =
  "In the future, at most MAILROOM_MAX_SCHEDULE_DAYS (30 unless set) days ahead: ISO 8601 with an offset, or plain English ('in 1 hour', 'tomorrow at 9am', 'friday at 3pm ET'; UTC unless a zone is given), see docs/sending.md.";

const invalid = (why: string) => new ServiceError('validation_error', `scheduled_at ${why}`, 'scheduled_at');

/**
 * When `value` says to send, as an instant after `now` and at most `maxDays` days after it (the
 * server's MAILROOM_MAX_SCHEDULE_DAYS; without it, any time up to the year 9999); undefined when no value
 * is given.
 */
export function parseScheduledAt(value: string | undefined, now: Date, maxDays?: number): Date | undefined {
  if (value === undefined) return undefined;
  const at = ISO_8601_WITH_OFFSET.test(value) ? isoInstant(value) : englishInstant(value, now);
  if (at.getTime() <= now.getTime()) throw invalid(`must be in the future; "${value}" is ${at.toISOString()}`);
  if (maxDays !== undefined && at.getTime() > now.getTime() + maxDays * UNIT_MS.day!) {
    const latest = new Date(now.getTime() + maxDays * UNIT_MS.day!).toISOString();
    throw invalid(
      `must be at most ${maxDays} days ahead (MAILROOM_MAX_SCHEDULE_DAYS); "${value}" is ${at.toISOString()}, the latest now is ${latest}`,
    );
  }
  return at;
}

function isoInstant(value: string): Date {
  const time = Date.parse(value);
  if (!isCalendarTimestamp(value) || Number.isNaN(time)) {
    throw invalid(`is not a real date and time: "${value}"; give ${FORMS}`);
  }
  return new Date(time);
}

/** ISO 8601 with an offset, and a real date and time (Date.parse would turn February 30 into March 2). */
function isCalendarTimestamp(value: string): boolean {
  const match = ISO_8601_WITH_OFFSET.exec(value);
  if (!match) return false;
  const [year, month, day, hour, minute, second = '0', offsetHours = '0', offsetMinutes = '0'] = match.slice(1);
  const daysInMonth = new Date(Date.UTC(Number(year), Number(month), 0)).getUTCDate();
  return (
    Number(month) >= 1 &&
    Number(month) <= 12 &&
    Number(day) >= 1 &&
    Number(day) <= daysInMonth &&
    Number(hour) <= 23 &&
    Number(minute) <= 59 &&
    Number(second) <= 59 &&
    Number(offsetHours) <= 23 &&
    Number(offsetMinutes) <= 59
  );
}

function englishInstant(value: string, now: Date): Date {
  const text = value.trim().toLowerCase().replace(/\s+/g, ' ');
  const unreadable = () => invalid(`must be ${FORMS}; got "${value}"`);

  const relative = RELATIVE.exec(text);
  if (relative) {
    const count = relative[1]!.startsWith('a') ? 1 : Number(relative[1]);
    const at = now.getTime() + count * UNIT_MS[relative[2]!]!;
    if (at > LATEST) throw invalid(`is too far ahead: "${value}"`);
    return new Date(at);
  }

  const calendar = CALENDAR.exec(text);
  const timeAndZone = calendar ? TIME_AND_ZONE.exec(calendar[2]!) : null;
  if (!calendar || !timeAndZone) {
    if (/^(today|tomorrow|[a-z]+day)$/.test(text)) {
      throw invalid(`needs a time: "${value}" could be any time that day; say e.g. "${text} at 9am"; give ${FORMS}`);
    }
    if (/^(today|tomorrow|[a-z]+day)( at)? \d{1,2}( |$)/.test(text)) {
      throw invalid(`is ambiguous: "${value}" has an hour without am/pm or minutes; say "9am", "9pm" or "21:00"`);
    }
    throw unreadable();
  }
  const clock = timeOfDay(timeAndZone[1]!);
  if (!clock) throw invalid(`has no such time of day: "${timeAndZone[1]}"; give ${FORMS}`);
  const zone = parseZone(timeAndZone[2]);
  if (!zone) throw invalid(`has a time zone not understood: "${timeAndZone[2]}"; give ${FORMS}`);

  // Today's date where the zone is; then the day asked for, at the time asked for, there.
  const today = wallDate(now, zone);
  const day = calendar[1]!;
  if (day === 'today' || day === 'tomorrow') {
    return zonedInstant(addDays(today, day === 'tomorrow' ? 1 : 0), clock, zone, value);
  }
  const wanted = WEEKDAYS.indexOf(day);
  const ahead = (wanted - new Date(Date.UTC(today.year, today.month - 1, today.day)).getUTCDay() + 7) % 7;
  const first = zonedInstant(addDays(today, ahead), clock, zone, value);
  return first.getTime() > now.getTime() ? first : zonedInstant(addDays(today, ahead + 7), clock, zone, value);
}

interface WallDate {
  year: number;
  month: number; // 1-12
  day: number;
}
interface Clock {
  hour: number;
  minute: number;
}
type Zone = { kind: 'fixed'; minutes: number } | { kind: 'region'; name: string };

function timeOfDay(text: string): Clock | undefined {
  if (text === 'noon') return { hour: 12, minute: 0 };
  if (text === 'midnight') return { hour: 0, minute: 0 };
  const twelve = TWELVE_HOUR.exec(text);
  if (twelve) {
    const hour = Number(twelve[1]);
    const minute = Number(twelve[2] ?? 0);
    if (hour < 1 || hour > 12 || minute > 59) return undefined;
    return { hour: (hour % 12) + (twelve[3] === 'pm' ? 12 : 0), minute };
  }
  const twentyFour = TWENTY_FOUR_HOUR.exec(text);
  if (twentyFour) {
    const hour = Number(twentyFour[1]);
    const minute = Number(twentyFour[2]);
    if (hour > 23 || minute > 59) return undefined;
    return { hour, minute };
  }
  return undefined;
}

function parseZone(text: string | undefined): Zone | undefined {
  if (text === undefined) return { kind: 'fixed', minutes: 0 };
  if (text in FIXED_ZONES) return { kind: 'fixed', minutes: FIXED_ZONES[text]! };
  if (text in REGION_ZONES) return { kind: 'region', name: REGION_ZONES[text]! };
  const offset = OFFSET.exec(text);
  if (offset) {
    const hours = Number(offset[2]);
    const minutes = Number(offset[3] ?? 0);
    if (hours > 14 || minutes > 59) return undefined;
    return { kind: 'fixed', minutes: (offset[1] === '-' ? -1 : 1) * (hours * 60 + minutes) };
  }
  if (!text.includes('/')) return undefined; // an IANA name has a region: "cet" or "bst" alone is not one
  const name = canonicalTimeZone(text);
  return name === undefined ? undefined : { kind: 'region', name };
}

/** Minutes east of UTC that the zone's clocks are at the instant `at`. */
function offsetAt(zone: Zone, at: number): number {
  return zone.kind === 'fixed' ? zone.minutes : zoneOffsetMinutes(at, zone.name);
}

function wallDate(at: Date, zone: Zone): WallDate {
  const shifted = new Date(at.getTime() + offsetAt(zone, at.getTime()) * 60_000);
  return { year: shifted.getUTCFullYear(), month: shifted.getUTCMonth() + 1, day: shifted.getUTCDate() };
}

function addDays(date: WallDate, days: number): WallDate {
  const moved = new Date(Date.UTC(date.year, date.month - 1, date.day + days));
  return { year: moved.getUTCFullYear(), month: moved.getUTCMonth() + 1, day: moved.getUTCDate() };
}

/** The instant when the zone's clocks read `clock` on `date`: the earlier of two, none in a skipped hour. */
function zonedInstant(date: WallDate, clock: Clock, zone: Zone, value: string): Date {
  const asUtc = Date.UTC(date.year, date.month - 1, date.day, clock.hour, clock.minute);
  // The offset changes at most once near any wall time: try the offsets in force around it, earliest first.
  const candidates = [...new Set([offsetAt(zone, asUtc - 86_400_000), offsetAt(zone, asUtc + 86_400_000)])]
    .map((offset) => asUtc - offset * 60_000)
    .filter((at) => asUtc - offsetAt(zone, at) * 60_000 === at)
    .sort((a, b) => a - b);
  if (candidates.length === 0) {
    throw invalid(`names a time that does not exist there (the clocks skip it that day): "${value}"`);
  }
  return new Date(candidates[0]!);
}
