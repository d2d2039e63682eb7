import { randomUUID } from 'node:crypto';
import type { Logger } from '../platform/logger.ts';
import type { Database, Queryable } from '../platform/db/database.ts';
import { listenOrPoll } from '../platform/db/listening.ts';
import { workerBatchSize } from '../platform/metrics.ts';
import { JOBS_CHANNEL, type QueueName } from './jobs.ts';
import { claimFailureLog } from './claim-failures.ts';
import { jobOf, releaseJobs, runJob, type FailedJobHook, type Job, type JobResult } from './leases.ts';
import { CLAIM_SETTINGS, claimGroupJobs, letGroupsGo, renewAndTakeGroups, type OwnedRow } from './group-claims.ts';
import type { Worker } from './worker.ts';

// A worker for jobs that run per group (a webhook endpoint's deliveries), at most `groupLimit` of a
// group's at a time across every worker and process. Each group has one owner at a time (a row of
// job_group_owners, taken by an upsert whose row lock lets one of two racing workers win, renewed on
// every claim, deleted when the group has nothing due): only the owner runs the group's jobs, so the
// limit is the owner's to keep, in memory. The owner claims a batch of the group's due jobs at once and
// starts the next one the moment a slot frees (the handler says when: for a webhook, when the receiver
// has answered), while the last one's bookkeeping is written behind it, in batches shared with the
// other slots. The database sees a claim per batch, not per job.
//
// A job is started only while both its lease and the group's ownership still outlast the longest a
// job can take (`jobSeconds`): a worker cut off from the database stops starting jobs before another
// worker can take the group over, so the limit holds even then. A dead owner's ownership runs out after
// `jobSeconds` + 30 s, its claimed jobs' leases after three times `jobSeconds` + 30 s.
//
// A claim's commit is not waited for (group-claims.ts says what a database crash can therefore repeat).
//
// A worker owns at most as many groups as it has slots, sharing the slots between them in turn, and
// takes the longest-waiting groups first; when it has no room for more, a group it has fed for
// `sliceMs` is left to run out and let go, so that no group waits for ever behind busy ones.

export interface GroupedJobHandler<T> {
  /** Reads what a claimed batch of jobs acts on, in one go, in the claim's transaction: one entry per job, in order. */
  load(tx: Queryable, jobs: Job[]): Promise<T[]>;
  /**
   * Runs one job. `slotFree` is called (once) when the part that counts against the group's limit is
   * over; the job's result may come later.
   */
  run(job: Job, loaded: T, slotFree: () => void): Promise<JobResult>;
}

export interface GroupedWorkerOptions {
  queue: QueueName;
  /** Jobs of one group in their slot at once, across all workers. */
  groupLimit: number;
  /** Jobs in their slot at once in this worker, across groups; it owns at most this many groups. */
  concurrency: number;
  /** The longest a job can hold its slot (a webhook's timeout). */
  jobSeconds: number;
  pollIntervalMs: number;
  /**
   * How long a worker with no room for more groups keeps feeding one before leaving it to run out, so
   * that the groups it has no room for get their turn (default 10 s).
   */
  sliceMs?: number;
  log: Pick<Logger, 'error' | 'warn'>;
  /** Failed runs (database outages aside) before a job fails for good: MAILROOM_JOB_MAX_ATTEMPTS. */
  maxAttempts?: number;
  /** The queue's hook that records a job's failure for good on what it acts on (FailurePolicy.failed). */
  failed?: FailedJobHook;
}

interface Group<T> {
  key: string;
  /** Claimed and read, not started, oldest first. */
  waiting: Array<{ job: Job; loaded: T }>;
  inSlot: number;
  /** The last claim found fewer of its due jobs than it asked for: the next poll or wake-up looks again. */
  drained: boolean;
  /** Until when this worker owns the group (epoch ms, by this process's clock). */
  ownedUntil: number;
  /** The group's version when its waiting jobs were claimed: a higher one means they were read too early. */
  version: number;
  /** When this worker took the group (epoch ms). */
  takenAt: number;
}

/** Slack on a lease or an ownership: a job starts only if it leaves this much after the job's longest run. */
const MARGIN_MS = 5_000;
const SLICE_MS = 10_000;

const jobsOf = (waiting: Array<{ job: Job }>) => waiting.map(({ job }) => job);

/** Oldest first: ids grow as jobs are added. */
const byId = (a: Job, b: Job) => a.id - b.id;

export async function startGroupedWorker<T>(
  db: Database,
  handler: GroupedJobHandler<T>,
  options: GroupedWorkerOptions,
): Promise<Worker> {
  const owner = randomUUID();
  const { queue, groupLimit } = options;
  // As many groups as slots: a busy group does not keep another from this worker's free slots.
  const maxGroups = options.concurrency;
  // Enough to keep the slots fed between two claims, few enough that a claim's lease stays short: a
  // webhook endpoint's 4 connections get 256, refilled with 128 still waiting, 25 ms of work at 5,000
  // deliveries a second, time for a claim on a busy database (half that left the slots dry at times).
  const batchSize = Math.min(500, groupLimit * 64);
  // A group is refilled while half a batch still waits: the slots do not run dry during the claim.
  const refillBelow = batchSize / 2;
  const ownSeconds = options.jobSeconds + 30;
  // Long enough to wait in memory a little, run and be settled, short enough that a dead worker's claimed
  // jobs come back soon. A job that waited too long (a slow endpoint's backlog) is given back unrun and
  // claimed again with the group's next refill.
  const leaseSeconds = 3 * options.jobSeconds + 30;
  const jobMs = options.jobSeconds * 1000;

  const groups = new Map<string, Group<T>>();
  let running = 0;
  let stopping = false;
  let claiming = false;
  const claimFailures = claimFailureLog(options.log, { queue });
  let claimAgain = false;
  let discoverAgain = false;
  let idle: (() => void) | undefined;
  let claimDone: Promise<void> = Promise.resolve();

  // One claim at a time: it renews every owned group, refills those running short and, when `discover`
  // (a wake-up, a poll, a group let go), takes groups no one owns while this worker has room for them.
  const claimAndRun = async (discover: boolean) => {
    if (stopping) return;
    discoverAgain ||= discover;
    if (claiming) {
      claimAgain = true;
      return;
    }
    claiming = true;
    let done = () => {};
    claimDone = new Promise((resolve) => (done = resolve));
    try {
      do {
        claimAgain = false;
        const looking = discoverAgain;
        discoverAgain = false;
        await claimOnce(looking);
      } while (claimAgain && !stopping);
      claimFailures.succeeded();
    } catch (error) {
      claimFailures.failed(error);
      // Unconfirmed (the database may have restarted and lost the last claims, which are not waited
      // for): no job starts until a claim renews the groups again.
      for (const group of groups.values()) group.ownedUntil = 0;
    } finally {
      claiming = false;
      done();
    }
  };

  const claimOnce = async (discover: boolean) => {
    const mine = [...groups.values()];
    const room = discover ? maxGroups - groups.size : 0;
    if (mine.length === 0 && room <= 0) return;
    // Asked for by a slot (not a poll or a wake-up) but no group runs short any more: nothing to do.
    const idleGroup = mine.some((group) => group.waiting.length === 0 && group.inSlot === 0);
    if (!discover && !idleGroup && !mine.some((group) => wantsRefill(group))) return;
    const startedAt = Date.now();
    // What waits in memory of a group changed since it was read is given back inside the claim, and
    // put back in memory if the claim fails (the give-back is then undone too).
    const dropped: Array<[Group<T>, Group<T>['waiting']]> = [];
    let claimed: { owned: OwnedRow[]; fill: Map<string, number>; jobs: Job[]; loaded: T[] };
    try {
      claimed = await db.transaction(async (tx) => {
        const owned = await renewAndTakeGroups(tx, {
          queue,
          owner,
          mine: mine.map((group) => group.key),
          room: Math.max(0, room),
          ownSeconds,
          skip: [...mine.map((group) => group.key), ...restingKeys()],
        });
        for (const { group_key, version } of owned) {
          const group = groups.get(group_key);
          if (group && group.version !== version) dropped.push([group, group.waiting.splice(0)]);
        }
        await releaseJobs(
          tx,
          dropped.flatMap(([, waiting]) => jobsOf(waiting)),
        );
        // New groups get a batch; owned ones what they lack, when short.
        const batch = batchFor(groups.size + owned.filter(({ group_key }) => !groups.has(group_key)).length);
        const fill = new Map(
          owned
            .map(({ group_key: key }) => {
              const group = groups.get(key);
              if (!group) return [key, batch] as const;
              const short = group.waiting.length < refillBelow && (discover || !group.drained) && !overSlice(group);
              return [key, short ? batch - group.waiting.length : 0] as const;
            })
            .filter(([, wanted]) => wanted > 0),
        );
        if (fill.size === 0) return { owned, fill, jobs: [], loaded: [] };
        const rows = await claimGroupJobs(tx, queue, fill, leaseSeconds);
        const jobs = rows.map((row) => jobOf(row, startedAt + leaseSeconds * 1000)).sort(byId);
        return { owned, fill, jobs, loaded: jobs.length > 0 ? await handler.load(tx, jobs) : [] };
      }, CLAIM_SETTINGS);
    } catch (error) {
      for (const [group, waiting] of dropped) group.waiting.unshift(...waiting);
      throw error;
    }
    const { owned, fill, jobs, loaded } = claimed;
    if (jobs.length > 0) workerBatchSize.observe({ batch: 'claim-group-jobs' }, jobs.length);
    const claimedBy = new Map<string, Group<T>['waiting']>();
    jobs.forEach((job, i) => {
      const list = claimedBy.get(job.groupKey!) ?? [];
      list.push({ job, loaded: loaded[i]! });
      claimedBy.set(job.groupKey!, list);
    });

    // The claim committed: memory follows it at once, the database's loose ends after.
    const ownedNow = new Set(owned.map((row) => row.group_key));
    const giveBack: Job[] = [];
    for (const group of mine) {
      if (ownedNow.has(group.key)) continue;
      // No longer this worker's (its row expired or went with a deleted endpoint): what waits goes back.
      groups.delete(group.key);
      giveBack.push(...jobsOf(group.waiting.splice(0)));
    }
    const letGo: string[] = [];
    let newJobs = 0;
    for (const { group_key: key, version } of owned) {
      const got = claimedBy.get(key) ?? [];
      let group = groups.get(key);
      if (!group) {
        group = { key, waiting: [], inSlot: 0, drained: false, ownedUntil: 0, version, takenAt: startedAt };
        groups.set(key, group);
        newJobs += got.length;
      }
      group.ownedUntil = startedAt + ownSeconds * 1000;
      group.version = version;
      if (fill.has(key)) group.drained = got.length < fill.get(key)!;
      group.waiting.push(...got);
      // Nothing due left (or its turn is over) and nothing running: let go, for whichever worker sees
      // its next job.
      if (group.waiting.length === 0 && group.inSlot === 0) {
        // Its turn ended with work left: this worker takes the others first (another worker may take it).
        if (overSlice(group)) resting.set(key, Date.now() + (options.sliceMs ?? SLICE_MS));
        groups.delete(key);
        letGo.push(key);
      }
    }
    feedAll();
    // Room left, and groups found with work: there may be more of them.
    if (newJobs > 0 && groups.size < maxGroups) discoverAgain = claimAgain = true;
    if (letGo.length > 0) discoverAgain = claimAgain = true; // others may be waiting for the room

    await releaseJobs(db, giveBack).catch((error: unknown) =>
      options.log.warn({ err: error, queue }, 'could not give back jobs; they return when their lease ends'),
    );
    if (letGo.length > 0) {
      // Failing, the rows run out on their own; meanwhile this worker may take them again itself.
      await letGroupsGo(db, queue, owner, letGo).catch((error: unknown) =>
        options.log.warn({ err: error, queue }, 'could not let groups go'),
      );
    }
  };

  /** Jobs claimed at once for a group, when this worker owns `owning` groups: they share its slots. */
  const batchFor = (owning: number) =>
    Math.min(batchSize, Math.max(2 * groupLimit, Math.floor((options.concurrency * 32) / Math.max(1, owning))));

  /** A group held past its turn while this worker has no room for others: it is left to run out. */
  const overSlice = (group: Group<T>) =>
    groups.size >= maxGroups && Date.now() - group.takenAt > (options.sliceMs ?? SLICE_MS);

  // Groups let go at the end of their turn, not taken again by this worker until the time given.
  const resting = new Map<string, number>();
  const restingKeys = () => {
    const now = Date.now();
    for (const [key, until] of resting) if (until <= now) resting.delete(key);
    return [...resting.keys()];
  };

  const wantsRefill = (group: Group<T>) => group.waiting.length < refillBelow && !group.drained && !overSlice(group);

  let inSlotTotal = 0;
  let nextToFeed = 0;

  // Every group in turn (a different one first each time), while this worker has free slots.
  const feedAll = () => {
    const all = [...groups.values()];
    for (let i = 0; i < all.length && inSlotTotal < options.concurrency; i++) {
      feed(all[(nextToFeed + i) % all.length]!);
    }
    nextToFeed = all.length === 0 ? 0 : (nextToFeed + 1) % all.length;
  };

  // Fills the group's free slots from memory, then asks for more when what waits would not fill them.
  const feed = (group: Group<T>) => {
    while (
      !stopping &&
      group.inSlot < groupLimit &&
      inSlotTotal < options.concurrency &&
      group.waiting.length > 0 &&
      groups.get(group.key) === group
    ) {
      const now = Date.now();
      if (now + jobMs + MARGIN_MS > group.ownedUntil) break; // ownership unconfirmed: wait for a claim to renew it
      if (overSlice(group)) {
        // Its turn is over: what waits goes back, and once what runs is done the group is let go.
        group.drained = true;
        void releaseJobs(db, jobsOf(group.waiting.splice(0))).catch(() => {});
        break;
      }
      if (now + jobMs + MARGIN_MS > group.waiting[0]!.job.leaseEndsAt) {
        // Waited too long: their leases would run out mid-job. Given back (all of them claimed as long
        // ago), and claimed again by the next refill; if that fails they come back when the lease ends.
        const stale = group.waiting.filter(({ job }) => now + jobMs + MARGIN_MS > job.leaseEndsAt);
        group.waiting = group.waiting.filter(({ job }) => now + jobMs + MARGIN_MS <= job.leaseEndsAt);
        group.drained = false;
        void releaseJobs(db, jobsOf(stale)).catch(() => {});
        continue;
      }
      const { job, loaded } = group.waiting.shift()!;
      void run(group, job, loaded);
    }
    if (!stopping && wantsRefill(group)) void claimAndRun(false);
  };

  const run = async (group: Group<T>, job: Job, loaded: T) => {
    running += 1;
    group.inSlot += 1;
    inSlotTotal += 1;
    let inSlot = true;
    const slotFree = () => {
      if (!inSlot) return;
      inSlot = false;
      // Other groups wait on this worker's slots only when all of them were taken.
      const othersWaited = inSlotTotal >= options.concurrency;
      group.inSlot -= 1;
      inSlotTotal -= 1;
      feed(group);
      if (othersWaited) feedAll();
    };
    const handle = async () => {
      try {
        return await handler.run(job, loaded, slotFree);
      } finally {
        slotFree(); // a handler that threw frees its slot too
      }
    };
    await runJob(db, job, handle, options.log, () => void claimAndRun(true), {
      maxAttempts: options.maxAttempts,
      failed: options.failed,
    });
    running -= 1;
    if (running === 0) idle?.();
    // The group's last job done: the next claim renews it, refills it or lets it go.
    if (group.inSlot === 0 && group.waiting.length === 0) void claimAndRun(false);
  };

  const unlisten = await listenOrPoll(db, JOBS_CHANNEL, () => void claimAndRun(true));
  // Polls find what a lost notification did not announce, and renew the groups owned meanwhile.
  const timer = setInterval(() => void claimAndRun(true), options.pollIntervalMs);
  void claimAndRun(true);

  return {
    poke: () => void claimAndRun(true),
    async stop() {
      stopping = true;
      clearInterval(timer);
      await unlisten();
      await claimDone;
      const waiting = [...groups.values()].flatMap((group) => jobsOf(group.waiting.splice(0)));
      await releaseJobs(db, waiting).catch((error: unknown) =>
        options.log.warn({ err: error, queue }, 'could not give back claimed jobs; they return when their lease ends'),
      );
      if (running > 0) await new Promise<void>((resolve) => (idle = resolve));
      await letGroupsGo(db, queue, owner).catch(() => {});
    },
  };
}
