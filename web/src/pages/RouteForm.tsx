import {
  bodyOf,
  emptyAction,
  errorPlace,
  RECIPIENT_KINDS,
  type ActionDraft,
  type RecipientKind,
  type RouteAction,
  type RouteDraft,
} from './inbound-route-model.ts';
import { useState, type FormEvent } from 'react';
import { type ListResponse } from '../api.ts';
import { Button, CheckboxField, ErrorBanner, Field, SelectField } from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { Webhook } from './WebhooksPage.tsx';

// The form that creates a route (the list page) and changes one (a route's own page).

export function RouteForm({
  initial,
  submitLabel,
  busyLabel,
  onSubmit,
  title,
  titleId,
  formId,
}: {
  initial: RouteDraft;
  submitLabel: string;
  busyLabel: string;
  /** Sends the body; resolves when saved, rejects with the API's error. */
  onSubmit: (body: ReturnType<typeof bodyOf>) => Promise<unknown>;
  title: string;
  titleId: string;
  /** The form's id, for a button elsewhere that brings it into view. */
  formId?: string;
}) {
  const [draft, setDraft] = useState<RouteDraft>(initial);
  const [localError, setLocalError] = useState<{ place: string; message: string } | undefined>(undefined);
  const save = useAction(onSubmit);
  const [saved, setSaved] = useState('');
  const webhooks = useApiGet<ListResponse<Webhook>>('/webhooks');
  const endpoints = webhooks.data?.data ?? [];

  const place = localError?.place ?? errorPlace(save.error, draft);
  const message = localError?.message ?? (save.error instanceof Error ? save.error.message : undefined);
  const errorAt = (name: string) => (place === name ? message : undefined);

  const change = (changes: Partial<RouteDraft>) => {
    setDraft((previous) => ({ ...previous, ...changes }));
    setLocalError(undefined);
    setSaved('');
    save.clearError();
  };
  const changeAction = (index: number, changes: Partial<ActionDraft>) =>
    change({ actions: draft.actions.map((action, at) => (at === index ? { ...action, ...changes } : action)) });

  async function submit(event: FormEvent) {
    event.preventDefault();
    setSaved('');
    const priority = Number(draft.priority.trim() || '0');
    if (!Number.isInteger(priority)) {
      setLocalError({ place: 'priority', message: 'Enter a whole number: lower numbers are tried first.' });
      return;
    }
    const result = await save.run(bodyOf(draft, priority));
    if (result !== undefined) setSaved('Saved.');
  }

  const kind = RECIPIENT_KINDS.find((entry) => entry.value === draft.kind) ?? RECIPIENT_KINDS[0]!;
  return (
    <form id={formId} className="card route-form" onSubmit={submit} aria-labelledby={titleId} noValidate>
      <h2 id={titleId}>{title}</h2>
      <ErrorBanner
        error={webhooks.error}
        title="The webhook endpoints could not be loaded (a route can still forward or reject)"
        onRetry={webhooks.reload}
      />
      <Field
        label="Description"
        value={draft.description}
        onChange={(description) => change({ description })}
        error={errorAt('description')}
        placeholder="Support mail to the help desk"
        autoComplete="off"
      />
      <Field
        label="Priority"
        type="number"
        inputMode="numeric"
        step={1}
        value={draft.priority}
        onChange={(priority) => change({ priority })}
        hint="Lower numbers are tried first; equal ones in the order they were added."
        error={errorAt('priority')}
        className="field-short"
      />
      <fieldset className="route-fieldset">
        <legend>Recipient</legend>
        <SelectField
          label="Match"
          value={draft.kind}
          onChange={(value) => change({ kind: value as RecipientKind })}
          options={RECIPIENT_KINDS.map((entry) => ({ value: entry.value, label: entry.label }))}
          error={errorAt('match.recipient_kind')}
        />
        {draft.kind === 'catch_all' ? (
          <>
            <p className="field-hint">{kind.hint}</p>
            {errorAt('match.recipient') ? <p className="field-error">{errorAt('match.recipient')}</p> : null}
          </>
        ) : (
          <Field
            label="Recipient pattern"
            value={draft.recipient}
            onChange={(recipient) => change({ recipient })}
            hint={kind.hint}
            placeholder={kind.placeholder}
            error={errorAt('match.recipient')}
            autoComplete="off"
            spellCheck={false}
          />
        )}
      </fieldset>
      <fieldset className="route-fieldset">
        <legend>Header condition</legend>
        <CheckboxField
          label="Only when a header matches"
          checked={draft.withHeader}
          onChange={(withHeader) => change({ withHeader })}
        />
        {draft.withHeader ? (
          <div className="form-pair">
            <Field
              label="Header name"
              value={draft.headerName}
              onChange={(headerName) => change({ headerName })}
              placeholder="Subject"
              error={errorAt('match.header.name')}
              autoComplete="off"
              spellCheck={false}
            />
            <Field
              label="Header pattern"
              value={draft.headerPattern}
              onChange={(headerPattern) => change({ headerPattern })}
              hint="A regular expression found anywhere in the header's value, without case"
              placeholder="^\[ticket-\d+\]"
              error={errorAt('match.header.pattern')}
              autoComplete="off"
              spellCheck={false}
            />
          </div>
        ) : null}
      </fieldset>
      <fieldset className="route-fieldset">
        <legend>Actions</legend>
        {errorAt('actions') ? <p className="field-error">{errorAt('actions')}</p> : null}
        <ol className="route-actions">
          {draft.actions.map((action, index) => {
            const n = index + 1;
            return (
              <li key={index} className="route-action">
                <SelectField
                  label={`Action ${n}`}
                  value={action.type}
                  onChange={(type) => changeAction(index, { type: type as RouteAction['type'] })}
                  options={[
                    { value: 'store', label: 'Store it (shows under Received)' },
                    { value: 'forward', label: 'Forward it' },
                    { value: 'webhook', label: 'Send it to a webhook endpoint' },
                    { value: 'reject', label: 'Reject it' },
                  ]}
                  error={errorAt(`actions.${index}.type`)}
                />
                {action.type === 'forward' ? (
                  <Field
                    label={`Action ${n}: forward to`}
                    value={action.to}
                    onChange={(to) => changeAction(index, { to })}
                    hint="Addresses, separated by commas"
                    placeholder="desk@acme.example"
                    error={errorAt(`actions.${index}.to`)}
                    autoComplete="off"
                    spellCheck={false}
                  />
                ) : null}
                {action.type === 'webhook' ? (
                  <SelectField
                    label={`Action ${n}: webhook endpoint`}
                    value={action.endpointId}
                    onChange={(endpointId) => changeAction(index, { endpointId })}
                    options={[
                      { value: '', label: endpoints.length ? 'Choose an endpoint' : 'No webhook endpoints yet' },
                      ...endpoints.map((endpoint) => ({ value: endpoint.id, label: endpoint.endpoint })),
                    ]}
                    hint={
                      <>
                        It gets an <code>email.received</code> event. Endpoints are added on the{' '}
                        <Link to="/webhooks">Webhooks</Link> page.
                      </>
                    }
                    error={
                      errorAt(`actions.${index}.endpoint_id`) ??
                      (webhooks.error ? 'The endpoints could not be loaded.' : undefined)
                    }
                  />
                ) : null}
                {action.type === 'reject' ? (
                  <Field
                    label={`Action ${n}: message`}
                    value={action.message}
                    onChange={(text) => changeAction(index, { message: text })}
                    hint="What the sending server is told (optional)"
                    placeholder="This address no longer takes mail"
                    error={errorAt(`actions.${index}.message`)}
                    autoComplete="off"
                  />
                ) : null}
                {draft.actions.length > 1 ? (
                  <Button
                    variant="quiet"
                    onClick={() => change({ actions: draft.actions.filter((_, at) => at !== index) })}
                  >
                    Remove action {n}
                  </Button>
                ) : null}
              </li>
            );
          })}
        </ol>
        <Button onClick={() => change({ actions: [...draft.actions, emptyAction()] })}>Add an action</Button>
      </fieldset>
      <CheckboxField
        label="Stop here: routes after this one are not tried when it matches"
        checked={draft.stop}
        onChange={(stop) => change({ stop })}
        error={errorAt('stop')}
      />
      <CheckboxField
        label="Enabled"
        checked={draft.enabled}
        onChange={(enabled) => change({ enabled })}
        error={errorAt('enabled')}
      />
      {place === undefined ? <ErrorBanner error={save.error} title="The route could not be saved" /> : null}
      <div className="button-row">
        <Button type="submit" variant="primary" busy={save.busy} busyLabel={busyLabel}>
          {submitLabel}
        </Button>
      </div>
      <p role="status" className="form-result">
        {saved}
      </p>
    </form>
  );
}
