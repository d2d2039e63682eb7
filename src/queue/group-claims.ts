import type { Queryable } from '../platform/db/database.ts';
import type { QueueName } from './jobs.ts';
import { CLAIMABLE, CLAIMED, LEASE, type ClaimedRow } from './leases.ts';

// The database side of the grouped worker (grouped-worker.ts): the job_group_owners rows by which one
// worker at a time owns a group (taken by an upsert whose row lock lets one of two racing workers win,
// renewed on every claim, deleted when the group has nothing due), and the claim of a group's due jobs.
//
// A claim's commit is not waited for (synchronous_commit off: the claim is on every slot's path, and
// the disk flush was most of its time). A database crash can therefore lose the claims of its last
// moment: a worker whose claim fails starts no job until a claim succeeds again, so what is repeated is
// at most the jobs in their slots at the crash, as after a worker's kill -9 (and while they run, their
// group may see up to twice its limit). What a job did is recorded by its handler with a commit that is
// waited for, and only while the job's lease is still the handler's.

/** Due jobs looked at to find groups no one owns. */
const GROUP_WINDOW = 1000;

// A group's due jobs are read in (run_at, id) order from its index, stopping at the batch: a backlog that
// arrived faster than statistics are gathered looks tiny to the planner, which would otherwise gather all
// of it through a bitmap and sort it (2 ms a claim at 5,000 jobs instead of 0.06 ms). The claim's commit
// is not waited for (see above).
export const CLAIM_SETTINGS = { enable_bitmapscan: 'off', synchronous_commit: 'off' };

export interface OwnedRow {
  group_key: string;
  /** Raised by groupChanged: what the group's jobs act on changed since a lower version was read. */
  version: number;
}

/**
 * Renews the groups `owner` holds (`mine`, while its ownership has not run out) and takes up to `room`
 * groups no one owns, the longest-waiting first (none of `skip`): the groups it owns now, with their
 * versions.
 */
export async function renewAndTakeGroups(
  tx: Queryable,
  spec: { queue: QueueName; owner: string; mine: string[]; room: number; ownSeconds: number; skip: string[] },
): Promise<OwnedRow[]> {
  const { rows } = await tx.query<OwnedRow>(
    `WITH renewed AS (
       UPDATE job_group_owners SET owned_until = now() + make_interval(secs => $5)
        WHERE queue = $1 AND owner = $2 AND group_key = ANY($3::text[]) AND owned_until > now()
       RETURNING group_key, version
     ),
     unowned AS (
       SELECT group_key FROM (
         SELECT group_key, min(run_at) AS due FROM (
           SELECT group_key, run_at FROM jobs j
            WHERE queue = $1 AND group_key IS NOT NULL AND ${CLAIMABLE} AND group_key <> ALL($6::text[])
              AND NOT EXISTS (SELECT 1 FROM job_group_owners o
                               WHERE o.queue = $1 AND o.group_key = j.group_key
                                 AND o.owned_until > now() AND o.owner <> $2)
            ORDER BY run_at, id LIMIT ${GROUP_WINDOW}) oldest
          GROUP BY group_key ORDER BY due LIMIT $4) longest_waiting
       ORDER BY group_key -- two workers lock the rows they share in one order
     ),
     taken AS (
       INSERT INTO job_group_owners (queue, group_key, owner, owned_until)
       SELECT $1, group_key, $2, now() + make_interval(secs => $5) FROM unowned
       ON CONFLICT (queue, group_key) DO UPDATE SET owner = excluded.owner, owned_until = excluded.owned_until
        WHERE job_group_owners.owned_until < now() OR job_group_owners.owner = excluded.owner
       RETURNING group_key, version
     )
     SELECT * FROM renewed UNION ALL SELECT * FROM taken`,
    [spec.queue, spec.owner, spec.mine, spec.room, spec.ownSeconds, spec.skip],
  );
  return rows;
}

/** Claims, under a lease of `leaseSeconds`, up to `fill`'s number of due jobs of each group it names, oldest first. */
export async function claimGroupJobs(
  tx: Queryable,
  queue: QueueName,
  fill: Map<string, number>,
  leaseSeconds: number,
): Promise<ClaimedRow[]> {
  const { rows } = await tx.query<ClaimedRow>(
    `UPDATE jobs SET ${LEASE}
      WHERE id IN (
        SELECT due.id FROM unnest($1::text[], $2::int[]) AS wanted(group_key, n)
         CROSS JOIN LATERAL (
           SELECT id FROM jobs
            WHERE group_key = wanted.group_key AND queue = $4 AND ${CLAIMABLE}
            ORDER BY run_at, id LIMIT wanted.n FOR UPDATE SKIP LOCKED) due)
      ${CLAIMED}`,
    [[...fill.keys()], [...fill.values()], leaseSeconds, queue],
  );
  return rows;
}

/** Gives up `owner`'s ownership of these groups (of all its groups when none are named). */
export async function letGroupsGo(db: Queryable, queue: QueueName, owner: string, groupKeys?: string[]): Promise<void> {
  await db.query(
    `DELETE FROM job_group_owners WHERE queue = $1 AND owner = $2 AND ($3::text[] IS NULL OR group_key = ANY($3::text[]))`,
    [queue, owner, groupKeys ?? null],
  );
}
