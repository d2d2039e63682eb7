import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';

// SEAM STUB (to be written): sending a broadcast (snapshot + fan-out), cancel, pause, resume.

/** POST /broadcasts/:id/send: now (snapshot and fan-out) or at `scheduledAt` (status scheduled). */
export async function sendBroadcast(
  _db: Queryable,
  _organizationId: string,
  _id: string,
  _scheduledAt: Date | undefined,
): Promise<{ id: string }> {
  throw new ServiceError('service_unavailable', 'not built yet');
}

/** POST /broadcasts/:id/cancel: a scheduled one returns to draft; a queued or paused one stops (canceled). */
export async function cancelBroadcast(_db: Queryable, _organizationId: string, _id: string): Promise<{ id: string }> {
  throw new ServiceError('service_unavailable', 'not built yet');
}

/** POST /broadcasts/:id/pause (Mailroom's own): no further copy leaves until resumed. */
export async function pauseBroadcast(
  _db: Queryable,
  _organizationId: string,
  _id: string,
  _reason: string,
): Promise<{ id: string }> {
  throw new ServiceError('service_unavailable', 'not built yet');
}

/** POST /broadcasts/:id/resume: a paused broadcast goes on where it stopped. */
export async function resumeBroadcast(_db: Queryable, _organizationId: string, _id: string): Promise<{ id: string }> {
  throw new ServiceError('service_unavailable', 'not built yet');
}
