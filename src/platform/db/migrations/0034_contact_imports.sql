-- expand: contact imports (Resend's /contacts/imports): a CSV file uploaded once, then read by a 'contact-import'
-- job that writes its rows as contacts in batches. The file is kept in the database, in chunks of about
-- 1 MiB written as the upload arrives, so an import answered 201 survives any crash and the upload is
-- never held whole in memory. Each batch of contacts commits together with the import's progress
-- (rows_done) and counts, so a job that dies resumes after the last batch that committed, and a batch
-- done again after a crash was rolled back the first time: nothing is counted or written twice.

CREATE TABLE contact_imports (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  -- 'uploading' while the request is still streaming the file in: such an import is not listed, has no
  -- job, and is removed when its request fails (or, left by a crash, by a later upload).
  status text NOT NULL DEFAULT 'uploading'
    CHECK (status IN ('uploading', 'queued', 'in_progress', 'completed', 'failed')),
  column_map jsonb,                               -- checked: { email, first_name?, last_name?, unsubscribed?, properties };
                                                -- NULL: columns found by their header names
  on_conflict text NOT NULL DEFAULT 'skip' CHECK (on_conflict IN ('upsert', 'skip')),
  segment_ids uuid[] NOT NULL DEFAULT '{}',      -- segments every imported contact joins
  topics jsonb NOT NULL DEFAULT '[]'::jsonb,      -- [{ id, subscription }] set on every imported contact
  file_bytes bigint NOT NULL DEFAULT 0,
  rows_done bigint NOT NULL DEFAULT 0,            -- data rows read so far (the header not counted)
  created bigint NOT NULL DEFAULT 0,
  updated bigint NOT NULL DEFAULT 0,
  skipped bigint NOT NULL DEFAULT 0,
  failed bigint NOT NULL DEFAULT 0,
  failure_reason text,                            -- why the whole file could not be read (status failed)
  created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  completed_at timestamptz
);
CREATE INDEX contact_imports_organization_idx ON contact_imports (organization_id, created_at, id);
CREATE INDEX contact_imports_uploading_idx ON contact_imports (created_at) WHERE status = 'uploading';

-- The file, in order; deleted once the import has completed or failed.
CREATE TABLE contact_import_chunks (
  import_id uuid NOT NULL REFERENCES contact_imports (id) ON DELETE CASCADE,
  seq int NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (import_id, seq)
);

-- One error per row that was not imported: its number in the file (the header is row 1), the column at
-- fault when there is one, and why.
CREATE TABLE contact_import_errors (
  import_id uuid NOT NULL REFERENCES contact_imports (id) ON DELETE CASCADE,
  "row" bigint NOT NULL,
  "column" text,
  message text NOT NULL,
  PRIMARY KEY (import_id, "row")
);

-- Which import wrote a contact last, and from which row: a later row of the same import with the same
-- address is told apart as a duplicate within the file (the first one wins), in the statement that
-- writes the batch, without holding the file's addresses in memory.
ALTER TABLE contacts ADD COLUMN import_id uuid, ADD COLUMN import_row bigint;
