import { useState, type FormEvent } from 'react';
import { api, fieldError, segment, type ListResponse } from '../../api.ts';
import { Button, ErrorBanner, Field, SelectField, TextAreaField } from '../../components/index.ts';
import { useAction, useApiGet } from '../../hooks.ts';
import type { Segment } from '../SegmentsPage.tsx';
import type { Template } from '../TemplatesPage.tsx';
import type { Broadcast } from './types.ts';

// The compose form of a broadcast that has not begun sending: its name, audience (a segment), topic,
// sender and content, written as HTML or loaded from a template. Saving creates the broadcast (a draft)
// or changes it; sending is done from the broadcast's page once it is saved.

interface Topic {
  id: string;
  name: string;
}

interface Draft {
  name: string;
  segmentId: string;
  topicId: string;
  from: string;
  /** Reply-To addresses, separated by commas. */
  replyTo: string;
  subject: string;
  previewText: string;
  html: string;
  text: string;
}

const EMPTY: Draft = {
  name: '',
  segmentId: '',
  topicId: '',
  from: '',
  replyTo: '',
  subject: '',
  previewText: '',
  html: '<p>Hello {{{contact.first_name|there}}},</p>\n<p>…</p>\n<p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p>',
  text: '',
};

function draftOf(broadcast: Broadcast): Draft {
  const replyTo = broadcast.reply_to;
  return {
    name: broadcast.name ?? '',
    segmentId: broadcast.segment_id ?? '',
    topicId: broadcast.topic_id ?? '',
    from: broadcast.from ?? '',
    replyTo: Array.isArray(replyTo) ? replyTo.join(', ') : (replyTo ?? ''),
    subject: broadcast.subject ?? '',
    previewText: broadcast.preview_text ?? '',
    html: broadcast.html ?? '',
    text: broadcast.text ?? '',
  };
}

/**
 * The form as the API takes it. Creating, an empty field is left out; changing, an empty optional field
 * is null (which clears it) and an empty segment, topic or from is left as it was.
 */
function bodyOf(draft: Draft, creating: boolean): Record<string, unknown> {
  const replyTo = draft.replyTo
    .split(',')
    .map((address) => address.trim())
    .filter(Boolean);
  const cleared = creating ? undefined : null;
  const body: Record<string, unknown> = {
    name: draft.name.trim() || cleared,
    segment_id: draft.segmentId || undefined,
    topic_id: draft.topicId || cleared,
    from: draft.from.trim() || undefined,
    reply_to: replyTo.length > 0 ? replyTo : cleared,
    subject: draft.subject,
    preview_text: draft.previewText || cleared,
    html: draft.html || cleared,
    text: draft.text || cleared,
  };
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));
}

const FIELDS = ['name', 'segment_id', 'topic_id', 'from', 'reply_to', 'subject', 'preview_text', 'html', 'text'];

export function BroadcastForm({
  broadcast,
  onSaved,
}: {
  /** The saved broadcast, or undefined for a new one. */
  broadcast: Broadcast | undefined;
  onSaved: (id: string, created: boolean) => void;
}) {
  const [draft, setDraft] = useState<Draft>(() => (broadcast ? draftOf(broadcast) : EMPTY));
  const [saved, setSaved] = useState('');
  const [templateId, setTemplateId] = useState('');
  const segments = useApiGet<ListResponse<Segment>>('/segments');
  const topics = useApiGet<ListResponse<Topic>>('/topics');
  const templates = useApiGet<ListResponse<Template>>('/templates');

  const save = useAction((body: Record<string, unknown>) =>
    broadcast
      ? api.patch<{ id: string }>(`/broadcasts/${segment(broadcast.id)}`, body)
      : api.post<{ id: string }>('/broadcasts', body),
  );
  const loadTemplate = useAction((id: string) => api.get<Template>(`/templates/${segment(id)}`));

  const set = (changes: Partial<Draft>) => {
    setDraft((previous) => ({ ...previous, ...changes }));
    setSaved('');
  };

  async function submit(event: FormEvent) {
    event.preventDefault();
    setSaved('');
    const result = await save.run(bodyOf(draft, !broadcast));
    if (!result) return;
    if (broadcast) setSaved('Saved.');
    onSaved(broadcast?.id ?? result.id, !broadcast);
  }

  async function applyTemplate() {
    if (!templateId) {
      setSaved('Choose a template first.');
      return;
    }
    const template = await loadTemplate.run(templateId);
    if (!template) return;
    set({
      html: template.html,
      text: template.text ?? '',
      subject: template.subject ?? draft.subject,
      from: draft.from || template.from || '',
      replyTo: draft.replyTo || (template.reply_to ?? []).join(', '),
      name: draft.name || template.name,
    });
    setSaved(`Loaded the template “${template.name}” into the form; save to keep it.`);
  }

  const segmentOptions = [
    { value: '', label: segments.loading && !segments.data ? 'Loading segments…' : 'Choose a segment' },
    ...(segments.data?.data ?? []).map((item) => ({
      value: item.id,
      label: `${item.name} (${item.contacts_count === 1 ? '1 contact' : `${item.contacts_count} contacts`})`,
    })),
  ];
  // A segment deleted since: the broadcast keeps its id until another is chosen.
  if (draft.segmentId && !segmentOptions.some((option) => option.value === draft.segmentId)) {
    segmentOptions.push({ value: draft.segmentId, label: draft.segmentId });
  }
  const topicOptions = [
    { value: '', label: 'No topic (every subscribed contact)' },
    ...(topics.data?.data ?? []).map((topic) => ({ value: topic.id, label: topic.name })),
  ];
  const templateOptions = [
    { value: '', label: 'Choose a template' },
    ...(templates.data?.data ?? []).map((template) => ({ value: template.id, label: template.name })),
  ];

  return (
    <form className="card" onSubmit={submit} aria-labelledby="broadcast-form-title" noValidate>
      <h2 id="broadcast-form-title">{broadcast ? 'Broadcast' : 'Compose'}</h2>
      {(templates.data?.data ?? []).length > 0 ? (
        <div className="inline-form">
          <SelectField
            label="Start from a template"
            hint="Loads the template's subject, HTML and text into the form (the broadcast keeps its own copy)."
            value={templateId}
            onChange={setTemplateId}
            options={templateOptions}
          />
          <Button busy={loadTemplate.busy} busyLabel="Loading…" onClick={applyTemplate}>
            Use template
          </Button>
        </div>
      ) : null}
      <ErrorBanner error={loadTemplate.error} title="The template could not be loaded" />
      <Field
        label="Name"
        hint="For you only; contacts never see it."
        value={draft.name}
        maxLength={200}
        onChange={(name) => set({ name })}
        error={fieldError(save.error, 'name')}
      />
      <SelectField
        label="Segment"
        hint="Who receives it: the segment's contacts when it is sent, less the unsubscribed and suppressed."
        value={draft.segmentId}
        onChange={(segmentId) => set({ segmentId })}
        options={segmentOptions}
        error={fieldError(save.error, 'segment_id')}
      />
      <SelectField
        label="Topic"
        hint="Optional: contacts who opted out of the topic are left out, and the unsubscribe link names it."
        value={draft.topicId}
        onChange={(topicId) => set({ topicId })}
        options={topicOptions}
        error={fieldError(save.error, 'topic_id')}
      />
      <Field
        label="From"
        hint="An address at a verified domain, e.g. Acme <news@acme.example>."
        value={draft.from}
        onChange={(from) => set({ from })}
        error={fieldError(save.error, 'from')}
        spellCheck={false}
      />
      <Field
        label="Reply-To"
        hint="Optional, addresses separated by commas."
        value={draft.replyTo}
        onChange={(replyTo) => set({ replyTo })}
        error={fieldError(save.error, 'reply_to')}
        spellCheck={false}
      />
      <Field
        label="Subject"
        value={draft.subject}
        onChange={(subject) => set({ subject })}
        error={fieldError(save.error, 'subject')}
      />
      <Field
        label="Preview text"
        hint="Optional: the line inboxes show after the subject."
        value={draft.previewText}
        onChange={(previewText) => set({ previewText })}
        error={fieldError(save.error, 'preview_text')}
      />
      <TextAreaField
        label="HTML"
        hint="{{{contact.first_name|there}}} inserts the contact's first name (or “there”), {{{contact.plan}}} a property, {{{RESEND_UNSUBSCRIBE_URL}}} the contact's unsubscribe link."
        value={draft.html}
        rows={10}
        onChange={(html) => set({ html })}
        error={fieldError(save.error, 'html')}
        spellCheck={false}
      />
      <TextAreaField
        label="Text"
        hint="Optional: the plain-text part, with the same placeholders."
        value={draft.text}
        rows={5}
        onChange={(text) => set({ text })}
        error={fieldError(save.error, 'text')}
        spellCheck={false}
      />
      <ErrorBanner error={save.error} title="The broadcast could not be saved" exceptFields={FIELDS} />
      <div className="button-row">
        <Button type="submit" variant="primary" busy={save.busy} busyLabel="Saving…">
          {broadcast ? 'Save broadcast' : 'Save draft'}
        </Button>
      </div>
      <p role="status" className="save-status">
        {saved}
      </p>
    </form>
  );
}
