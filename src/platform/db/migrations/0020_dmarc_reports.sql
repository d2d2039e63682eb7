-- expand: DMARC aggregate reports (RFC 7489 appendix C) that mailbox providers send to the rua address at the
-- inbound listener (src/inbound/dmarc-reports.ts), stored per sending domain: one row per report, and
-- one per record of it (a source address on the report's day, with how many messages passed DKIM and
-- SPF in alignment with the From domain). A report is stored once per domain, whatever its resends.
CREATE TABLE dmarc_reports (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  domain_id uuid NOT NULL REFERENCES domains (id) ON DELETE CASCADE,
  reporter text NOT NULL,
  reporter_email text,
  report_id text NOT NULL,
  begin_at timestamptz NOT NULL,
  end_at timestamptz NOT NULL,
  policy text,
  received_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (domain_id, reporter, report_id)
);
CREATE INDEX dmarc_reports_domain_idx ON dmarc_reports (domain_id, begin_at);

CREATE TABLE dmarc_report_rows (
  report_id uuid NOT NULL REFERENCES dmarc_reports (id) ON DELETE CASCADE,
  day date NOT NULL,
  source_ip text NOT NULL,
  messages integer NOT NULL,
  dkim_aligned boolean NOT NULL,
  spf_aligned boolean NOT NULL,
  disposition text,
  header_from text,
  envelope_from text,
  dkim_domains text[] NOT NULL,
  spf_domain text
);
CREATE INDEX dmarc_report_rows_report_idx ON dmarc_report_rows (report_id);
