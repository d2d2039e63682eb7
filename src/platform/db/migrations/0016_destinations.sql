-- expand: traffic shaping per destination site (src/shaping/). Every worker process of an install reads and
-- writes these rows, so the limits hold summed over all of them, not per process.
--
-- A site's row: the limits in force now (the configured ones, lowered by back-off after throttling and
-- raised again by successes), its message-rate bucket, and its hold (a provider's, or the operator's).
CREATE TABLE destination_sites (
  source text NOT NULL,                       -- the egress source ('default' while there is one)
  site text NOT NULL,                         -- google, microsoft, …, mx:<hosts>, or the domain
  connection_limit integer NOT NULL CHECK (connection_limit >= 1),
  message_rate double precision,              -- messages a minute in force now; NULL: no limit
  tokens double precision NOT NULL DEFAULT 0, -- what the message-rate bucket holds at tokens_at
  tokens_at timestamptz NOT NULL,
  connection_rate double precision,           -- new connections a minute; NULL: no limit
  connection_tokens double precision NOT NULL DEFAULT 0,
  connection_tokens_at timestamptz NOT NULL,
  paused_until timestamptz,
  pause_reason text,                          -- throttled, site_paused
  pause_reply text,                           -- the reply (or the operator's words) that paused it
  hold_count integer NOT NULL DEFAULT 0,      -- holds in a row: each one longer, up to a cap
  last_hold_ms bigint,
  last_hold_until timestamptz,                -- when the last hold ends (or ended): repeats count from it
  successes integer NOT NULL DEFAULT 0,       -- since the limits last moved
  capped_until timestamptz,                   -- a shaping-file rule lowered the limits until then, to:
  cap_connection_limit integer,
  cap_message_rate double precision,
  throttle_replies bigint NOT NULL DEFAULT 0,
  last_reply_code integer,
  last_reply_text text,
  last_reply_at timestamptz,
  PRIMARY KEY (source, site)
);

-- One row per connection slot of a site in use: slot numbers run from 1 to the site's connection limit,
-- so two processes can never hold the same slot and the limit holds across processes. The holder renews
-- its leases while its connections are open; a dead holder's slots run out within the lease.
CREATE TABLE destination_connections (
  source text NOT NULL,
  site text NOT NULL,
  slot integer NOT NULL,
  holder uuid NOT NULL,
  leased_until timestamptz NOT NULL,
  PRIMARY KEY (source, site, slot)
);
CREATE INDEX destination_connections_holder_idx ON destination_connections (holder);

-- A hold of one sending domain at one site (the site said the sender itself is at fault: its
-- authentication, its DMARC): only that domain's mail to that site waits.
CREATE TABLE destination_sender_holds (
  site text NOT NULL,
  sender_domain text NOT NULL,
  paused_until timestamptz NOT NULL,
  reply text NOT NULL,
  PRIMARY KEY (site, sender_domain)
);

-- The site a pending recipient was last tried at (or held for), so that a site's queue can be counted,
-- and the hold it waits in (its delivery_delayed entry is written once per hold, not once per try).
ALTER TABLE email_recipients ADD COLUMN site text, ADD COLUMN hold_reason text;
CREATE INDEX email_recipients_pending_site_idx ON email_recipients (site) WHERE status = 'pending' AND site IS NOT NULL;
