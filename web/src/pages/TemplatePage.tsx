import {
  type VariableRow,
  type Draft,
  type Rendered,
  EMPTY,
  draftOf,
  fallbackValue,
  isBlank,
  sampleOf,
  parseSample,
} from './template-draft.ts';
import { useEffect, useState, type FormEvent } from 'react';
import { api, ApiError, fieldError, segment } from '../api.ts';
import {
  Button,
  ConfirmButton,
  ErrorBanner,
  Field,
  Loading,
  PageHeader,
  RelativeTime,
  SelectField,
  TextAreaField,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { statusLabel, type Template, type VariableType } from './TemplatesPage.tsx';

export function TemplatePage({ params }: PageProps) {
  const id = params.id ?? 'new';
  const isNew = id === 'new';
  const template = useApiGet<Template>(isNew ? null : `/templates/${segment(id)}`);
  const [draft, setDraft] = useState<Draft | null>(isNew ? EMPTY : null);
  const [sample, setSample] = useState(isNew ? sampleOf(EMPTY.variables) : '');
  const [sampleError, setSampleError] = useState<string | undefined>(undefined);
  const [rendered, setRendered] = useState<Rendered | null>(null);
  const [saved, setSaved] = useState('');
  // Which form row each saved variable came from, so that an error about variables.<n> lands on its row.
  const [savedRows, setSavedRows] = useState<number[]>([]);

  useEffect(() => {
    if (template.data && draft === null) {
      const loaded = draftOf(template.data);
      setDraft(loaded);
      setSample(sampleOf(loaded.variables));
    }
  }, [template.data, draft]);

  const save = useAction(async (body: Record<string, unknown>) =>
    isNew ? api.post<{ id: string }>('/templates', body) : api.patch<{ id: string }>(`/templates/${segment(id)}`, body),
  );
  const preview = useAction((body: Record<string, unknown>) => api.post<Rendered>('/templates/render', body));
  const publish = useAction(() => api.post<{ id: string }>(`/templates/${segment(id)}/publish`, {}));
  const duplicate = useAction(() => api.post<{ id: string }>(`/templates/${segment(id)}/duplicate`, {}));

  if (!draft) {
    return (
      <>
        <PageHeader title="Template" description={<Link to="/templates">All templates</Link>} />
        <ErrorBanner error={template.error} title="The template could not be loaded" onRetry={template.reload} />
        {template.loading ? <Loading label="Loading the template…" /> : null}
      </>
    );
  }

  const set = (changes: Partial<Draft>) => {
    setDraft({ ...draft, ...changes });
    setSaved('');
  };
  const setVariable = (index: number, changes: Partial<VariableRow>) =>
    set({ variables: draft.variables.map((row, at) => (at === index ? { ...row, ...changes } : row)) });

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (!draft) return;
    setSaved('');
    const rows = draft.variables.flatMap((row, index) => (isBlank(row) ? [] : [index]));
    setSavedRows(rows);
    const replyTo = draft.replyTo
      .split(',')
      .map((address) => address.trim())
      .filter(Boolean);
    const result = await save.run({
      name: draft.name.trim(),
      alias: draft.alias.trim() || null,
      from: draft.from.trim() || null,
      reply_to: replyTo.length > 0 ? replyTo : null,
      subject: draft.subject,
      html: draft.html,
      text: draft.text,
      variables: rows.map((index) => {
        const row = draft.variables[index]!;
        return { key: row.key.trim(), type: row.type, fallback_value: fallbackValue(row) };
      }),
    });
    if (!result) return;
    if (isNew) navigate(`/templates/${result.id}`, { replace: true });
    else {
      setSaved('Saved as a draft. Sends use the published version until you publish this one.');
      template.reload();
    }
  }

  async function runPublish() {
    setSaved('');
    if (await publish.run()) {
      setSaved('Published. Sends with this template use this version from now on.');
      template.reload();
    }
  }

  async function runDuplicate() {
    const copy = await duplicate.run();
    if (copy) navigate(`/templates/${copy.id}`);
  }

  /** The save error about one form row's variable (the API numbers the rows it was sent). */
  const rowError = (index: number) => {
    const sent = savedRows.indexOf(index);
    return sent === -1 ? undefined : fieldError(save.error, `variables.${sent}`);
  };

  async function runPreview() {
    if (!draft) return;
    const parsed = parseSample(sample);
    if ('error' in parsed) {
      setSampleError(parsed.error);
      return;
    }
    setSampleError(undefined);
    // Declared fallbacks fill what the sample leaves out, as a send would.
    const values: Record<string, unknown> = {};
    for (const row of draft.variables) {
      const fallback = fallbackValue(row);
      if (row.key && (typeof fallback === 'string' || typeof fallback === 'number')) values[row.key] = fallback;
    }
    Object.assign(values, parsed.values);
    const result = await preview.run({
      subject: draft.subject,
      html: draft.html,
      text: draft.text,
      variables: values,
    });
    if (result) setRendered(result);
  }

  // An error about the list as a whole (not one row's key or fallback).
  const variablesError =
    save.error instanceof ApiError && save.error.field === 'variables' ? save.error.message : undefined;
  // A mistake in a source is shown next to it, whether saving or previewing found it.
  const sourceError = (field: string) => fieldError(save.error, field) ?? fieldError(preview.error, field);

  return (
    <>
      <PageHeader
        title={isNew ? 'New template' : draft.name || 'Template'}
        description={<Link to="/templates">All templates</Link>}
      />
      <div className="template-editor">
        <form className="card template-form" onSubmit={submit} aria-labelledby="template-form-title" noValidate>
          <h2 id="template-form-title">Template</h2>
          <Field
            label="Name"
            value={draft.name}
            maxLength={200}
            onChange={(name) => set({ name })}
            error={fieldError(save.error, 'name')}
          />
          <Field
            label="Alias"
            hint="Optional; names the template in sends and paths instead of its id, e.g. order-shipped."
            value={draft.alias}
            maxLength={100}
            onChange={(alias) => set({ alias })}
            error={fieldError(save.error, 'alias')}
            spellCheck={false}
          />
          <Field
            label="From"
            hint="Optional; a send without its own from uses it, e.g. Shop <orders@example.com>."
            value={draft.from}
            onChange={(from) => set({ from })}
            error={fieldError(save.error, 'from')}
            spellCheck={false}
          />
          <Field
            label="Reply-To"
            hint="Optional, addresses separated by commas; a send without its own reply_to uses them."
            value={draft.replyTo}
            onChange={(replyTo) => set({ replyTo })}
            error={fieldError(save.error, 'reply_to')}
            spellCheck={false}
          />
          <Field
            label="Subject"
            hint="Optional; a send without its own subject uses it."
            value={draft.subject}
            onChange={(subject) => set({ subject })}
            error={sourceError('subject')}
          />
          <TextAreaField
            label="HTML"
            hint="{{name}} is escaped; {{{name}}} inserts HTML as is."
            value={draft.html}
            rows={8}
            onChange={(html) => set({ html })}
            error={sourceError('html')}
            spellCheck={false}
          />
          <TextAreaField
            label="Text"
            value={draft.text}
            rows={5}
            onChange={(text) => set({ text })}
            error={sourceError('text')}
            spellCheck={false}
          />

          <fieldset className="variables">
            <legend>Variables</legend>
            <p className="field-hint">
              What each send may give. A variable with no fallback must be given a value when sending.
            </p>
            {draft.variables.map((row, index) => (
              <div className="variable-row" key={index} role="group" aria-label={`Variable ${index + 1}`}>
                <Field
                  label="Key"
                  value={row.key}
                  onChange={(key) => setVariable(index, { key })}
                  error={rowError(index)}
                  spellCheck={false}
                />
                <SelectField
                  label="Type"
                  value={row.type}
                  onChange={(type) => setVariable(index, { type: type as VariableType })}
                  options={[
                    { value: 'string', label: 'Text' },
                    { value: 'number', label: 'Number' },
                    { value: 'boolean', label: 'Yes or no' },
                    { value: 'object', label: 'Object (JSON)' },
                    { value: 'list', label: 'List (JSON)' },
                  ]}
                />
                <Field
                  label="Fallback"
                  value={row.fallback}
                  onChange={(fallback) => setVariable(index, { fallback })}
                />
                <Button
                  variant="quiet"
                  onClick={() => set({ variables: draft.variables.filter((_row, at) => at !== index) })}
                >
                  Remove<span className="visually-hidden"> variable {row.key || index + 1}</span>
                </Button>
              </div>
            ))}
            {variablesError ? <p className="field-error">{variablesError}</p> : null}
            <Button
              disabled={draft.variables.length >= 50}
              onClick={() => set({ variables: [...draft.variables, { key: '', type: 'string', fallback: '' }] })}
            >
              Add variable
            </Button>
          </fieldset>

          <ErrorBanner
            error={save.error}
            title="The template could not be saved"
            exceptFields={['name', 'alias', 'from', 'reply_to', 'subject', 'html', 'text', 'variables']}
          />
          <div className="button-row">
            <Button type="submit" variant="primary" busy={save.busy} busyLabel="Saving…">
              {isNew ? 'Create template' : 'Save template'}
            </Button>
          </div>
          <p role="status" className="save-status">
            {saved}
          </p>
        </form>

        <section className="card template-preview" aria-labelledby="preview-title">
          <h2 id="preview-title">Preview</h2>
          <TextAreaField
            label="Sample values (JSON)"
            hint='Values for the variables, e.g. {"name": "Ann"}; declared fallbacks fill the rest.'
            value={sample}
            rows={4}
            onChange={(value) => (setSample(value), setSampleError(undefined))}
            error={sampleError ?? fieldError(preview.error, 'variables')}
            spellCheck={false}
          />
          <ErrorBanner
            error={preview.error}
            title="The preview could not be rendered"
            exceptFields={['subject', 'html', 'text', 'variables']}
          />
          <Button variant="primary" busy={preview.busy} busyLabel="Rendering…" onClick={runPreview}>
            Preview
          </Button>
          {rendered ? (
            <div className="rendered" aria-live="polite">
              <h3>Subject</h3>
              <p className="rendered-subject">{rendered.subject ?? <span className="muted">No subject</span>}</p>
              <h3>HTML</h3>
              {rendered.html !== null ? (
                <iframe className="rendered-html" title="Rendered HTML" sandbox="" srcDoc={rendered.html} />
              ) : (
                <p className="muted">No HTML part.</p>
              )}
              <h3>Text</h3>
              {rendered.text !== null ? (
                <pre className="rendered-text">{rendered.text}</pre>
              ) : (
                <p className="muted">No text part.</p>
              )}
            </div>
          ) : (
            <p className="muted">Press Preview to render the template with the sample values, as a send would.</p>
          )}
        </section>
      </div>

      {!isNew && template.data ? (
        <section className="card" aria-labelledby="publication-title">
          <h2 id="publication-title">Publication</h2>
          <dl className="details">
            <dt>Status</dt>
            <dd>{statusLabel(template.data)}</dd>
            <dt>Last published</dt>
            <dd>
              {template.data.published_at ? (
                <RelativeTime value={template.data.published_at} />
              ) : (
                'Never: sends with this template are refused until it is published'
              )}
            </dd>
          </dl>
          <ErrorBanner error={publish.error} title="The template could not be published" />
          <ErrorBanner error={duplicate.error} title="The template could not be duplicated" />
          <div className="button-row">
            <Button
              variant="primary"
              busy={publish.busy}
              busyLabel="Publishing…"
              disabled={template.data.status === 'published' && !template.data.has_unpublished_versions}
              onClick={runPublish}
            >
              Publish
            </Button>
            <Button busy={duplicate.busy} busyLabel="Duplicating…" onClick={runDuplicate}>
              Duplicate
            </Button>
          </div>
        </section>
      ) : null}

      {!isNew ? (
        <section className="card" aria-labelledby="delete-title">
          <h2 id="delete-title">Delete</h2>
          <ConfirmButton
            question={`Delete the template “${draft.name}”? Sends that name it will be refused.`}
            busyLabel="Deleting…"
            onConfirm={async () => {
              await api.delete(`/templates/${segment(id)}`);
              navigate('/templates');
            }}
          >
            Delete template
          </ConfirmButton>
        </section>
      ) : null}
    </>
  );
}
