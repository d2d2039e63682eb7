-- expand: template versions (src/templates/template-versions.ts). The templates row is the version being
-- edited (current_version_id); publishing copies it into template_versions, and sends render only the
-- published copy (published_version_id), so an edit reaches recipients when it is published, not when
-- it is saved. An edit after a publish starts a new current version. alias, from and reply_to are
-- Resend's: an alias names the template wherever an id does, unique per organization.
ALTER TABLE templates
  ADD COLUMN alias text,
  ADD COLUMN sender text,
  ADD COLUMN reply_to jsonb,
  ADD COLUMN current_version_id uuid NOT NULL DEFAULT gen_random_uuid(),
  ADD COLUMN published_version_id uuid,
  ADD COLUMN published_at timestamptz;

CREATE UNIQUE INDEX templates_alias_idx ON templates (organization_id, alias) WHERE alias IS NOT NULL;

CREATE TABLE template_versions (
  id uuid PRIMARY KEY,
  template_id uuid NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
  number integer NOT NULL,
  subject text,
  html text,
  text text,
  variables jsonb NOT NULL,
  sender text,
  reply_to jsonb,
  published_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (template_id, number)
);

-- Every template that exists is in use as it is: it becomes its own published version 1, so nothing
-- that sends with it today changes.
INSERT INTO template_versions (id, template_id, number, subject, html, text, variables, published_at)
  SELECT current_version_id, id, 1, subject, html, text, variables, updated_at FROM templates;
UPDATE templates SET published_version_id = current_version_id, published_at = updated_at;

ALTER TABLE templates
  ADD CONSTRAINT templates_published_version_fk FOREIGN KEY (published_version_id) REFERENCES template_versions (id);
