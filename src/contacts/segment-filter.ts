import { ServiceError } from '../platform/errors.ts';

// SEAM STUB (to be written): a segment's `filter`, its grammar and its SQL.

/** A parsed, checked filter (kept as given, in segments.filter). */
export type SegmentFilter = Record<string, unknown>;

/** Checks a filter as given to POST/PATCH /segments; a 400 on `field` says what is wrong. */
export function parseSegmentFilter(value: unknown, field: string): SegmentFilter {
  throw new ServiceError('validation_error', `${field}: filters are not built yet (${typeof value})`, field);
}

/**
 * A SQL condition over the contacts row `c` (organization already fixed by the caller) that holds for the
 * contacts of the segment: its members, and, when it has a filter, the contacts the filter matches.
 * Values are pushed onto `params` and referenced as $n.
 */
export function segmentAudienceCondition(
  segment: { id: string; filter: SegmentFilter | null },
  params: unknown[],
): string {
  params.push(segment.id);
  return `EXISTS (SELECT 1 FROM contact_segments cs WHERE cs.contact_id = c.id AND cs.segment_id = $${params.length})`;
}
