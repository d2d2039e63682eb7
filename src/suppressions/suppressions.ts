import type { Queryable } from '../platform/db/database.ts';
import { ServiceError, notFound } from '../platform/errors.ts';
import { addressKey } from '../platform/address-key.ts';
import { parseMailbox } from '../platform/addresses.ts';
import { isUuid } from '../platform/ids.ts';

// The organization's suppression list: addresses it does not send to. Hard bounces (delivery/, inbound/)
// and complaints (inbound/) add themselves; the organization adds and removes addresses over the API.
// Removing one is how a sender says "this mailbox works again": the next message goes out.

export type SuppressionReason = 'hard_bounce' | 'complaint' | 'manual';
/** Resend's name for the reason: how the address came onto the list. */
export type SuppressionOrigin = 'bounce' | 'complaint' | 'manual';

export const SUPPRESSION_ORIGINS: Record<SuppressionReason, SuppressionOrigin> = {
  hard_bounce: 'bounce',
  complaint: 'complaint',
  manual: 'manual',
};
const REASONS = Object.fromEntries(
  Object.entries(SUPPRESSION_ORIGINS).map(([reason, origin]) => [origin, reason]),
) as Record<SuppressionOrigin, SuppressionReason>;

/** Addresses one batch call adds or removes at most (Resend's limit). */
export const MAX_BATCH = 100;

export interface SuppressionView {
  object: 'suppression';
  id: string;
  email: string;
  origin: SuppressionOrigin;
  /** The message whose bounce or complaint listed the address; null when listed by hand. */
  source_id: string | null;
  reason: SuppressionReason;
  created_at: string;
}

interface SuppressionRow {
  id: string;
  address: string;
  reason: SuppressionReason;
  source_email_id: string | null;
  created_at: Date;
}

const COLUMNS = 'id, address, reason, source_email_id, created_at';

const view = (row: SuppressionRow): SuppressionView => ({
  object: 'suppression',
  id: row.id,
  email: row.address,
  origin: SUPPRESSION_ORIGINS[row.reason],
  source_id: row.source_email_id,
  reason: row.reason,
  created_at: row.created_at.toISOString(),
});

/** The list key of an address: the bare address, as addressKey compares it (delivery matches lower(address)). */
function suppressionKey(input: string, field = 'email'): string {
  const mailbox = parseMailbox(input, field);
  if (mailbox.name !== undefined) {
    throw new ServiceError(
      'validation_error',
      `Invalid address in ${field}: give the bare address, without a name`,
      field,
    );
  }
  return addressKey(mailbox.address);
}

/**
 * Lists an address because of what happened to a message sent to it (delivery/, inbound/), inside the
 * transaction that records it. An address already listed keeps the reason it was listed for.
 */
export async function suppressAddress(
  tx: Queryable,
  organizationId: string,
  address: string,
  reason: Exclude<SuppressionReason, 'manual'>,
  sourceEmailId: string,
): Promise<void> {
  await tx.query(
    `INSERT INTO suppressions (organization_id, address, reason, source_email_id) VALUES ($1, $2, $3, $4)
     ON CONFLICT DO NOTHING`,
    [organizationId, addressKey(address), reason, sourceEmailId],
  );
}

/**
 * SQL for a data-modifying CTE body that puts on the suppression list the addresses of the earlier CTE
 * `from` (columns `organization_id`, `email_id` of the message that bounced, and `address`: an address
 * key, or NULL for none) with `reason`, for a statement that records why (a batch of delivery outcomes).
 * In a fixed order (organization, then address): two statements that suppress overlapping sets wait for
 * each other in the same order, so they cannot deadlock. An address already listed keeps its reason.
 */
export function suppressionsFrom(from: string, address: string, reason: Exclude<SuppressionReason, 'manual'>): string {
  return `INSERT INTO suppressions (organization_id, address, reason, source_email_id)
    SELECT organization_id, ${address}, '${reason}', (array_agg(email_id))[1] FROM ${from} WHERE ${address} IS NOT NULL
     GROUP BY organization_id, ${address} ORDER BY organization_id, ${address} COLLATE "C"
    ON CONFLICT DO NOTHING`;
}

/** Adds an address by hand; an address already listed keeps its reason. `created` says which happened. */
export async function addSuppression(
  db: Queryable,
  organizationId: string,
  email: string,
): Promise<{ suppression: SuppressionView; created: boolean }> {
  const address = suppressionKey(email);
  const inserted = await db.query<SuppressionRow>(
    `INSERT INTO suppressions (organization_id, address, reason) VALUES ($1, $2, 'manual')
     ON CONFLICT (organization_id, address) DO NOTHING
     RETURNING ${COLUMNS}`,
    [organizationId, address],
  );
  if (inserted.rows[0]) return { suppression: view(inserted.rows[0]), created: true };
  return { suppression: await getSuppression(db, organizationId, address), created: false };
}

/**
 * Adds up to MAX_BATCH addresses by hand, all or none: one address that is not one refuses the whole
 * call (400 on `emails.<i>`) before anything is listed. Answers one entry per address given, in order;
 * an address already listed (or given twice) answers with its existing entry, which keeps its reason.
 */
export async function addSuppressions(
  db: Queryable,
  organizationId: string,
  emails: string[],
): Promise<Array<{ object: 'suppression'; id: string }>> {
  const addresses = emails.map((email, i) => suppressionKey(email, `emails.${i}`));
  const wanted = [...new Set(addresses)];
  // Inserted in a fixed order, as suppressionsFrom does, so overlapping calls cannot deadlock.
  await db.query(
    `INSERT INTO suppressions (organization_id, address, reason)
     SELECT $1, address, 'manual' FROM unnest($2::text[]) AS address ORDER BY address COLLATE "C"
     ON CONFLICT (organization_id, address) DO NOTHING`,
    [organizationId, wanted],
  );
  const { rows } = await db.query<{ id: string; address: string }>(
    'SELECT id, address FROM suppressions WHERE organization_id = $1 AND address = ANY($2::text[])',
    [organizationId, wanted],
  );
  const ids = new Map(rows.map((row) => [row.address, row.id]));
  return addresses.flatMap((address) => {
    const id = ids.get(address);
    // Removed by a concurrent call between the two statements: it was listed, and is not any more.
    return id === undefined ? [] : [{ object: 'suppression' as const, id }];
  });
}

/**
 * Removes up to MAX_BATCH entries named by address or by id, all in one statement. A malformed address
 * or id refuses the whole call (400) before anything is removed; one that names no entry of the list is
 * left out of the answer, so that repeating a removal does no harm.
 */
export async function removeSuppressions(
  db: Queryable,
  organizationId: string,
  by: { emails: string[] } | { ids: string[] },
): Promise<Array<{ object: 'suppression'; id: string; deleted: true }>> {
  const byEmail = 'emails' in by;
  const keys = byEmail
    ? by.emails.map((email, i) => suppressionKey(email, `emails.${i}`))
    : by.ids.map((id, i) => {
        if (!isUuid(id))
          throw new ServiceError('validation_error', `ids.${i}: "${id}" is not a suppression id`, `ids.${i}`);
        return id.toLowerCase();
      });
  // Locked in a fixed order before deleting, as they are inserted, so overlapping calls cannot deadlock.
  const { rows } = await db.query<{ id: string; address: string }>(
    `WITH doomed AS (
       SELECT id FROM suppressions
        WHERE organization_id = $1 AND ${byEmail ? 'address' : 'id'} = ANY($2::${byEmail ? 'text' : 'uuid'}[])
        ORDER BY address COLLATE "C" FOR UPDATE
     )
     DELETE FROM suppressions s USING doomed WHERE s.id = doomed.id RETURNING s.id, s.address`,
    [organizationId, [...new Set(keys)]],
  );
  const removed = new Map(rows.map((row) => [byEmail ? row.address : row.id, row.id]));
  const seen = new Set<string>();
  return keys.flatMap((key) => {
    const id = removed.get(key);
    if (id === undefined || seen.has(id)) return [];
    seen.add(id);
    return [{ object: 'suppression' as const, id, deleted: true as const }];
  });
}

/** One entry, named by its id or its address. */
export async function getSuppression(
  db: Queryable,
  organizationId: string,
  idOrEmail: string,
): Promise<SuppressionView> {
  const { column, key } = pathKey(idOrEmail);
  const { rows } = await db.query<SuppressionRow>(
    `SELECT ${COLUMNS} FROM suppressions WHERE organization_id = $1 AND ${column} = $2`,
    [organizationId, key],
  );
  if (!rows[0]) throw notFound(`Suppression ${idOrEmail}`);
  return view(rows[0]);
}

/** Takes an entry, named by its id or its address, off the list. */
export async function deleteSuppression(
  db: Queryable,
  organizationId: string,
  idOrEmail: string,
): Promise<{ id: string; email: string }> {
  const { column, key } = pathKey(idOrEmail);
  const { rows } = await db.query<{ id: string; address: string }>(
    `DELETE FROM suppressions WHERE organization_id = $1 AND ${column} = $2 RETURNING id, address`,
    [organizationId, key],
  );
  if (!rows[0]) throw notFound(`Suppression ${idOrEmail}`);
  return { id: rows[0].id, email: rows[0].address };
}

export interface SuppressionPage {
  limit: number;
  /** The id or address of the last entry of the previous page. */
  after?: string;
  /** The id or address of the first entry of the next page: the page before it. */
  before?: string;
  origin?: SuppressionOrigin;
}

/** Oldest first, `limit` at a time, optionally only the entries of one origin. */
export async function listSuppressions(
  db: Queryable,
  organizationId: string,
  page: SuppressionPage,
): Promise<{ object: 'list'; has_more: boolean; data: SuppressionView[] }> {
  if (page.after !== undefined && page.before !== undefined) {
    throw new ServiceError('validation_error', 'Use either after or before, not both', 'before');
  }
  const field = page.before !== undefined ? 'before' : 'after';
  const given = page.before ?? page.after;
  // The cursor must be an entry on the list: there is no place to continue from otherwise.
  let cursor: string | null = null;
  if (given !== undefined) {
    const { column, key } = cursorKey(given, field);
    const { rows } = await db.query<{ id: string }>(
      `SELECT id FROM suppressions WHERE organization_id = $1 AND ${column} = $2`,
      [organizationId, key],
    );
    if (!rows[0])
      throw new ServiceError('validation_error', `${field}: ${given} is not on the suppression list`, field);
    cursor = rows[0].id;
  }
  const forward = page.before === undefined;
  const { rows } = await db.query<SuppressionRow>(
    `SELECT ${COLUMNS} FROM suppressions
      WHERE organization_id = $1
        AND ($2::text IS NULL OR reason = $2)
        AND ($3::uuid IS NULL OR (created_at, address) ${forward ? '>' : '<'}
             (SELECT created_at, address FROM suppressions WHERE organization_id = $1 AND id = $3))
      ORDER BY created_at ${forward ? 'ASC' : 'DESC'}, address ${forward ? 'ASC' : 'DESC'}
      LIMIT $4`,
    [organizationId, page.origin ? REASONS[page.origin] : null, cursor, page.limit + 1],
  );
  const data = rows.slice(0, page.limit);
  if (!forward) data.reverse();
  return { object: 'list', has_more: rows.length > page.limit, data: data.map(view) };
}

/** A path's entry: an id, else an address; a malformed one cannot be on the list, so it reads as not found. */
function pathKey(idOrEmail: string): { column: 'id' | 'address'; key: string } {
  if (isUuid(idOrEmail)) return { column: 'id', key: idOrEmail.toLowerCase() };
  try {
    return { column: 'address', key: suppressionKey(idOrEmail) };
  } catch {
    throw notFound(`Suppression ${idOrEmail}`);
  }
}

/** A cursor's entry: an id, else an address, which must be well formed (400 on the field otherwise). */
function cursorKey(value: string, field: string): { column: 'id' | 'address'; key: string } {
  return isUuid(value)
    ? { column: 'id', key: value.toLowerCase() }
    : { column: 'address', key: suppressionKey(value, field) };
}
