-- expand: A group of jobs (a webhook endpoint's deliveries) is run by one worker at a time, its owner, which
-- claims the group's due jobs in batches and feeds them to the group's slots from memory
-- (src/queue/grouped-worker.ts). The row says who owns the group and until when; the owner renews it
-- while it works and deletes it when the group has nothing due. A dead owner's row simply runs out, and
-- the next worker takes the group over by the same upsert, whose row lock lets only one of two racing
-- workers win. A change to what the group's jobs act on (an endpoint's URL, secret, switch, deletion)
-- raises its version: at its next renewal the owner drops the jobs it read before the change, and claims
-- and reads them again.
CREATE TABLE job_group_owners (
  queue text NOT NULL,
  group_key text NOT NULL,
  owner uuid NOT NULL,
  owned_until timestamptz NOT NULL,
  version integer NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, group_key)
);
