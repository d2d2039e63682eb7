-- expand: events and automations: named events with an optional payload schema, the events an application sends, automations with their versions, and runs with their steps.

-- A named event (Resend's /events): its optional schema is a flat map of payload key to type
-- (string, number, boolean, date). Events may also be sent under names never declared here.
CREATE TABLE event_definitions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  schema jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz
);
CREATE UNIQUE INDEX event_definitions_name_idx ON event_definitions (organization_id, name);
CREATE INDEX event_definitions_list_idx ON event_definitions (organization_id, created_at, id);

-- Each event sent (POST /events/send), as sent: a contact by id or by address, and a payload. A worker
-- processes it (processed_at): it starts the runs of the automations it triggers and resumes the runs
-- waiting for it, in one transaction.
CREATE TABLE received_events (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  contact_id uuid,
  email text,
  payload jsonb NOT NULL DEFAULT '{}'::jsonb,
  received_at timestamptz NOT NULL DEFAULT now(),
  processed_at timestamptz
);
CREATE INDEX received_events_name_idx ON received_events (organization_id, name, received_at DESC, id);
CREATE INDEX received_events_list_idx ON received_events (organization_id, received_at DESC, id);
-- Retention prunes events oldest first, across organizations.
CREATE INDEX received_events_age_idx ON received_events (received_at, id);

-- An automation: its current graph is the newest row of automation_versions (a run keeps the version it
-- started with). trigger_event is that version's trigger, for finding what an event starts.
CREATE TABLE automations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  status text NOT NULL DEFAULT 'disabled',
  version integer NOT NULL DEFAULT 1,
  trigger_event text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX automations_list_idx ON automations (organization_id, created_at, id);
CREATE INDEX automations_trigger_idx ON automations (organization_id, trigger_event) WHERE status = 'enabled';

CREATE TABLE automation_versions (
  automation_id uuid NOT NULL REFERENCES automations (id) ON DELETE CASCADE,
  version integer NOT NULL,
  steps jsonb NOT NULL,
  connections jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (automation_id, version)
);

-- One run per (automation, event that started it): an event processed twice starts nothing twice.
-- contact_id is not a foreign key: a run outlives its contact (it is cancelled when the contact goes).
CREATE TABLE automation_runs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  automation_id uuid NOT NULL REFERENCES automations (id) ON DELETE CASCADE,
  version integer NOT NULL,
  event_id uuid NOT NULL,
  contact_id uuid NOT NULL,
  contact_email text NOT NULL,
  status text NOT NULL DEFAULT 'running',
  started_at timestamptz,
  completed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (automation_id, event_id)
);
CREATE INDEX automation_runs_list_idx ON automation_runs (automation_id, created_at, id);
CREATE INDEX automation_runs_contact_idx ON automation_runs (contact_id) WHERE status = 'running';
-- Retention: finished runs oldest first; an event a running run still reads is kept.
CREATE INDEX automation_runs_finished_idx ON automation_runs (completed_at, id) WHERE status <> 'running';
CREATE INDEX automation_runs_event_idx ON automation_runs (event_id) WHERE status = 'running';

-- Each step a run enters, numbered in the order entered (seq): a step a loop comes back to is entered
-- again under a new number. Each row is run by one queue job (run_id, seq), and its status says whether
-- that job has done it, so a job run twice (its worker died after the work) does nothing the second time.
-- wait_event and contact_id find the steps waiting for an event; wake_at is when a delay ends or a wait
-- times out.
CREATE TABLE automation_run_steps (
  run_id uuid NOT NULL REFERENCES automation_runs (id) ON DELETE CASCADE,
  seq integer NOT NULL,
  organization_id uuid NOT NULL,
  automation_id uuid NOT NULL,
  contact_id uuid NOT NULL,
  step_key text NOT NULL,
  step_type text NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  wait_event text,
  wake_at timestamptz,
  output jsonb,
  error jsonb,
  started_at timestamptz,
  completed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, seq)
);
CREATE INDEX automation_run_steps_waiting_idx ON automation_run_steps (organization_id, contact_id, wait_event)
  WHERE status = 'waiting' AND wait_event IS NOT NULL;
CREATE INDEX automation_run_steps_counts_idx ON automation_run_steps (automation_id, step_key, status);
CREATE INDEX automation_run_steps_contact_idx ON automation_run_steps (contact_id)
  WHERE status IN ('pending', 'running', 'waiting');

-- Deleting a contact ends its runs: whatever deletes it (the API, an automation's contact_delete step, an
-- organization's cleanup), the runs read `cancelled` and their steps not yet done are cancelled, in the
-- same transaction. A step job that wakes for a cancelled run does nothing.
CREATE FUNCTION automation_runs_end_with_contact() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE automation_runs SET status = 'cancelled', completed_at = now()
   WHERE contact_id = OLD.id AND status = 'running';
  UPDATE automation_run_steps SET status = 'cancelled', completed_at = now()
   WHERE contact_id = OLD.id AND status IN ('pending', 'running', 'waiting');
  RETURN OLD;
END;
$$;
CREATE TRIGGER contacts_end_automation_runs AFTER DELETE ON contacts
  FOR EACH ROW EXECUTE FUNCTION automation_runs_end_with_contact();
