// IANA time zones, read from the runtime's own data (Intl), so that Mailroom needs no time-zone library
// and agrees with the database's AT TIME ZONE for every zone both know.

/** The canonical name of an IANA time zone (`europe/paris` → `Europe/Paris`); undefined when unknown. */
export function canonicalTimeZone(name: string): string | undefined {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

/** Minutes `timeZone`'s clocks are ahead of UTC at `instant` (ms since the epoch). */
export function zoneOffsetMinutes(instant: number, timeZone: string): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  }).formatToParts(new Date(instant));
  const field = (type: string) => Number(parts.find((part) => part.type === type)!.value);
  const wallClock = Date.UTC(
    field('year'),
    field('month') - 1,
    field('day'),
    field('hour'),
    field('minute'),
    field('second'),
  );
  return Math.round((wallClock - Math.floor(instant / 1000) * 1000) / 60_000);
}
