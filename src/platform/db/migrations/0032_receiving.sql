-- expand: receiving email. A domain whose receiving capability is enabled takes mail at the inbound listener
-- (its MX points there); inbound routes decide, per recipient, whether a message is refused at RCPT TO,
-- stored, forwarded or announced to one webhook endpoint. Each message accepted is stored raw with what
-- was read from it (Resend's received-email shape), its attachments, the results of checking its
-- sender's authentication (SPF, DKIM, DMARC, ARC) and, when a spam filter is configured, its verdict.

ALTER TABLE domains ADD COLUMN receiving boolean NOT NULL DEFAULT false;
-- Sent messages from this domain carry a signed reply address (reply+<token>@<domain>) as Reply-To
-- when the send does not set one, so that a reply comes back here and is tied to the message.
ALTER TABLE domains ADD COLUMN reply_tracking boolean NOT NULL DEFAULT false;
-- The signed reply address a sent message carried (opt-in per send, or per domain); NULL: none.
ALTER TABLE emails ADD COLUMN reply_address text;

-- One row per organization a received message was accepted for: a transaction with recipients at two
-- organizations' domains is stored once for each, with only that organization's recipients in
-- received_for. store_key (SHA-256 over the raw bytes and those recipients) makes storing idempotent: the
-- same transaction handed over again (a sender retrying after a reply it never got) is the same row, and
-- its email.received event fires once; the same bytes for other recipients are another row.
CREATE TABLE received_emails (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  store_key bytea NOT NULL,
  -- The envelope: the SMTP MAIL FROM ('' for a null sender) and the RCPT TO addresses of this organization.
  mail_from text NOT NULL,
  received_for text[] NOT NULL,
  -- The headers as read: From (as written), To/Cc/Bcc/Reply-To addresses, Subject, Message-ID.
  from_address text NOT NULL,
  to_addresses text[] NOT NULL DEFAULT '{}',
  cc_addresses text[] NOT NULL DEFAULT '{}',
  bcc_addresses text[] NOT NULL DEFAULT '{}',
  reply_to_addresses text[] NOT NULL DEFAULT '{}',
  subject text NOT NULL DEFAULT '',
  message_id text NOT NULL DEFAULT '',
  -- A flat map of header name (lower case) to its value (several of one name joined with ', ').
  headers jsonb NOT NULL DEFAULT '{}'::jsonb,
  html text,
  text text,
  -- The text without its quoted history and signature.
  stripped_text text,
  size_bytes integer NOT NULL,
  -- Who handed it over: the client's address, its HELO name, and whether the session was under TLS.
  client_address text NOT NULL DEFAULT '',
  helo text NOT NULL DEFAULT '',
  tls boolean NOT NULL DEFAULT false,
  -- {spf:{result,domain}, dkim:[{result,domain,selector}], dmarc:{result,domain,policy}, arc:{result}}.
  authentication jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- The spam filter's verdict: NULL when no filter is configured (or it could not be reached).
  spam_verdict text CHECK (spam_verdict IN ('ham', 'spam')),
  spam_score real,
  quarantined boolean NOT NULL DEFAULT false,
  -- The sent message this one answers (same organization), by reply token or by In-Reply-To/References.
  in_reply_to_email_id uuid REFERENCES emails (id) ON DELETE SET NULL,
  -- The routes that matched, in the order they were applied, and what each did.
  routes jsonb NOT NULL DEFAULT '[]'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX received_emails_store_key_idx ON received_emails (organization_id, store_key);
CREATE INDEX received_emails_organization_idx ON received_emails (organization_id, created_at DESC, id DESC);
CREATE INDEX received_emails_created_idx ON received_emails (created_at);
CREATE INDEX received_emails_reply_idx ON received_emails (in_reply_to_email_id) WHERE in_reply_to_email_id IS NOT NULL;

-- The raw message as it arrived, apart from the parsed row so that lists never read it.
CREATE TABLE received_email_raw (
  received_email_id uuid PRIMARY KEY REFERENCES received_emails (id) ON DELETE CASCADE,
  content bytea NOT NULL
);

CREATE TABLE received_attachments (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  received_email_id uuid NOT NULL REFERENCES received_emails (id) ON DELETE CASCADE,
  position integer NOT NULL,
  filename text,
  content_type text NOT NULL,
  content_disposition text CHECK (content_disposition IN ('inline', 'attachment')),
  content_id text,
  size_bytes integer NOT NULL,
  content bytea NOT NULL
);
CREATE INDEX received_attachments_email_idx ON received_attachments (received_email_id, position);

-- Inbound routes, Mailroom's own API: tried in priority order (lowest first, then oldest); a route
-- matches on its recipient pattern and, when it has one, a header; its actions run; `stop` ends the
-- walk. A recipient no route matches is stored when its domain receives mail (the default action).
CREATE TABLE inbound_routes (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  description text NOT NULL DEFAULT '',
  priority integer NOT NULL DEFAULT 0,
  -- exact: the address; domain: every address at a domain; plus_tag: the tag after '+';
  -- regex: a regular expression over the whole address; catch_all: every address (explicit on purpose).
  recipient_kind text NOT NULL CHECK (recipient_kind IN ('exact', 'domain', 'plus_tag', 'regex', 'catch_all')),
  recipient_pattern text NOT NULL DEFAULT '',
  header_name text,
  header_pattern text,
  -- [{type:'store'} | {type:'forward', to:[...]} | {type:'webhook', endpoint_id} | {type:'reject', message}]
  actions jsonb NOT NULL,
  stop boolean NOT NULL DEFAULT false,
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbound_routes_organization_idx ON inbound_routes (organization_id, priority, created_at, id);
