-- expand: warm-up of a new sending address, per source and destination site (src/shaping/warmup.ts): the stage
-- it has reached, and what the current day (UTC, `YYYY-MM-DD`) has seen so far. A stage advances at the
-- first send of a new day, judged by the day before: over 90% of the stage's volume delivered, under 5%
-- deferred, no block. A block steps it back at once (once a day).
CREATE TABLE warmup_state (
  source text NOT NULL,
  site text NOT NULL,
  stage integer NOT NULL DEFAULT 0,
  day text NOT NULL,
  sent integer NOT NULL DEFAULT 0,
  delivered integer NOT NULL DEFAULT 0,
  deferred integer NOT NULL DEFAULT 0,
  blocked boolean NOT NULL DEFAULT false,
  started_at timestamptz NOT NULL,
  -- The last change of stage (or refusal to change) and why, for the API and the dashboard.
  last_change text,
  changed_at timestamptz,
  PRIMARY KEY (source, site)
);
