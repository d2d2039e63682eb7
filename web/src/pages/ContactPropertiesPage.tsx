import { useState, type FormEvent } from 'react';
import { api, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  JumpToForm,
  LearnMore,
  Loading,
  PageHeader,
  RelativeTime,
  SelectField,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import type { PageProps } from '../router.tsx';

export type PropertyType = 'string' | 'number';

export interface ContactProperty {
  id: string;
  key: string;
  type: PropertyType;
  fallback_value: string | number | null;
  created_at: string;
}

const TYPES: Array<{ value: PropertyType; label: string }> = [
  { value: 'string', label: 'Text (string)' },
  { value: 'number', label: 'Number' },
];

/** What a typed field holds, as the API takes it: a number for a number property when it reads as one. */
export function propertyValue(type: PropertyType, text: string): string | number | null {
  if (text.trim() === '') return null;
  if (type === 'string') return text;
  const number = Number(text);
  // Not a number: sent as typed, so the API's refusal names the field.
  return Number.isFinite(number) ? number : text;
}

function PropertyForm({ onDone }: { onDone: () => void }) {
  const [key, setKey] = useState('');
  const [type, setType] = useState<PropertyType>('string');
  const [fallback, setFallback] = useState('');
  const create = useAction((body: { key: string; type: PropertyType; fallback_value: string | number | null }) =>
    api.post('/contact-properties', body),
  );

  async function submit(event: FormEvent) {
    event.preventDefault();
    const result = await create.run({ key: key.trim(), type, fallback_value: propertyValue(type, fallback) });
    if (result !== undefined) {
      setKey('');
      setFallback('');
      onDone();
    }
  }

  return (
    <form id="create-property" className="card" onSubmit={submit} aria-labelledby="create-property-title" noValidate>
      <h3 id="create-property-title">Add a property</h3>
      <Field
        label="Key"
        hint="Letters, digits and underscores, up to 50, not starting with a digit: company, plan, seats. Fixed once added."
        value={key}
        maxLength={50}
        onChange={(value) => (setKey(value), create.clearError())}
        error={fieldError(create.error, 'key')}
        autoComplete="off"
      />
      <SelectField
        label="Type"
        hint="Fixed once added."
        value={type}
        onChange={(value) => setType(value as PropertyType)}
        options={TYPES}
        error={fieldError(create.error, 'type')}
      />
      <Field
        label="Fallback value"
        hint="Optional: what a contact without a value of their own reads as."
        value={fallback}
        inputMode={type === 'number' ? 'decimal' : undefined}
        onChange={(value) => (setFallback(value), create.clearError())}
        error={fieldError(create.error, 'fallback_value')}
      />
      <ErrorBanner error={create.error} exceptFields={['key', 'type', 'fallback_value']} />
      <Button type="submit" variant="primary" busy={create.busy} busyLabel="Adding…">
        Add property
      </Button>
    </form>
  );
}

export function ContactPropertiesPage(_props: PageProps) {
  const properties = useApiGet<ListResponse<ContactProperty>>('/contact-properties');
  const list = properties.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="Contact properties"
        description={
          <>
            Values your contacts can carry (a company, a plan), each with its type and a fallback.{' '}
            <LearnMore page="audience" section="contact-properties" about="contact properties" />
          </>
        }
        actions={<JumpToForm formId="create-property">New property</JumpToForm>}
      />
      <ErrorBanner error={properties.error} title="The properties could not be loaded" onRetry={properties.reload} />
      {properties.loading && !properties.data ? <Loading label="Loading properties…" /> : null}
      {properties.data && list.length === 0 ? (
        <EmptyState title="No contact properties yet">
          Add a property below, then set its value on a contact&apos;s page or with <code>properties</code> in{' '}
          <code>POST /contacts</code>.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Contact properties"
          captionHidden
          rows={list}
          rowKey={(property) => property.id}
          columns={[
            { header: 'Key', cell: (property) => <code>{property.key}</code> },
            { header: 'Type', cell: (property) => (property.type === 'number' ? 'Number' : 'Text') },
            {
              header: 'Fallback',
              cell: (property) => (property.fallback_value === null ? '—' : String(property.fallback_value)),
            },
            {
              header: 'Added',
              className: 'nowrap hide-narrow',
              cell: (property) => <RelativeTime value={property.created_at} />,
            },
            {
              header: 'Actions',
              cell: (property) => (
                <ConfirmButton
                  question={`Delete “${property.key}”? Every contact's value for it goes too.`}
                  busyLabel="Deleting…"
                  onConfirm={async () => {
                    await api.delete(`/contact-properties/${segment(property.id)}`);
                    properties.reload();
                  }}
                >
                  <span>
                    Delete<span className="visually-hidden"> {property.key}</span>
                  </span>
                </ConfirmButton>
              ),
            },
          ]}
        />
      ) : null}
      <PropertyForm onDone={properties.reload} />
    </>
  );
}
