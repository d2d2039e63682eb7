import { useEffect, useState, type FormEvent } from 'react';
import { api, errorMessage, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  CheckboxField,
  ConfirmButton,
  EmptyState,
  ErrorBanner,
  Field,
  Loading,
  PageHeader,
  Timestamp,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import type { Contact, Subscription } from './TopicsPage.tsx';
import { propertyValue, type ContactProperty, type PropertyType } from './ContactPropertiesPage.tsx';
import type { Segment } from './SegmentsPage.tsx';

/** A contact as GET /contacts/:id gives it: each property with the value a message would use. */
type ContactWithProperties = Contact & {
  properties: Record<string, { type: PropertyType; value: string | number }>;
};

interface ContactTopic {
  id: string;
  name: string;
  description: string | null;
  /** The contact's own choice, else the topic's default. */
  subscription: Subscription;
}

function ContactForm({ contact, onSaved }: { contact: Contact; onSaved: () => void }) {
  const [email, setEmail] = useState(contact.email);
  const [firstName, setFirstName] = useState(contact.first_name ?? '');
  const [lastName, setLastName] = useState(contact.last_name ?? '');
  const [unsubscribed, setUnsubscribed] = useState(contact.unsubscribed);
  const [saved, setSaved] = useState('');
  const save = useAction((body: Record<string, unknown>) => api.patch(`/contacts/${segment(contact.id)}`, body));

  async function submit(event: FormEvent) {
    event.preventDefault();
    setSaved('');
    const result = await save.run({
      email: email.trim(),
      first_name: firstName.trim() || null,
      last_name: lastName.trim() || null,
      unsubscribed,
    });
    if (result !== undefined) {
      setSaved('Saved.');
      onSaved();
    }
  }

  return (
    <form className="card" onSubmit={submit} aria-labelledby="contact-form-title" noValidate>
      <h2 id="contact-form-title">Details</h2>
      <Field
        label="Email"
        type="email"
        value={email}
        onChange={(value) => (setEmail(value), save.clearError())}
        error={fieldError(save.error, 'email')}
      />
      <div className="form-pair">
        <Field
          label="First name"
          value={firstName}
          onChange={setFirstName}
          error={fieldError(save.error, 'first_name')}
        />
        <Field label="Last name" value={lastName} onChange={setLastName} error={fieldError(save.error, 'last_name')} />
      </div>
      <CheckboxField
        label="Unsubscribed from everything"
        hint="While set, no topic send reaches this contact, whatever their topic choices."
        checked={unsubscribed}
        onChange={setUnsubscribed}
        error={fieldError(save.error, 'unsubscribed')}
      />
      <ErrorBanner error={save.error} exceptFields={['email', 'first_name', 'last_name', 'unsubscribed']} />
      <div className="button-row">
        <Button type="submit" variant="primary" busy={save.busy} busyLabel="Saving…">
          Save contact
        </Button>
      </div>
      <p role="status" className="save-status">
        {saved}
      </p>
    </form>
  );
}

function TopicChoice({
  contactId,
  topic,
  onChanged,
}: {
  contactId: string;
  topic: ContactTopic;
  onChanged: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  // The box shows the choice being saved at once; the topic as read again then takes over.
  const [requested, setRequested] = useState<boolean | null>(null);
  useEffect(() => setRequested(null), [topic.subscription]);
  const subscribed = requested ?? topic.subscription === 'opt_in';
  return (
    <li className="topic-choice">
      <CheckboxField
        label={topic.name}
        hint={topic.description ?? undefined}
        checked={subscribed}
        disabled={busy}
        aria-busy={busy || undefined}
        error={error === undefined ? undefined : errorMessage(error)}
        onChange={async (checked) => {
          setBusy(true);
          setError(undefined);
          setRequested(checked);
          try {
            await api.patch(`/contacts/${segment(contactId)}/topics`, [
              { id: topic.id, subscription: checked ? 'opt_in' : 'opt_out' },
            ]);
            onChanged();
          } catch (caught) {
            setError(caught);
            setRequested(null);
          } finally {
            setBusy(false);
          }
        }}
      />
    </li>
  );
}

/**
 * The contact's value for each of the organization's properties. A field shows the contact's own value;
 * one left empty (or equal to the fallback) reads as the fallback, shown as the placeholder.
 */
function PropertiesForm({
  contact,
  properties,
  onSaved,
}: {
  contact: ContactWithProperties;
  properties: ContactProperty[];
  onSaved: () => void;
}) {
  const shown = (property: ContactProperty) => {
    const value = contact.properties[property.key]?.value;
    return value === undefined || value === property.fallback_value ? '' : String(value);
  };
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries(properties.map((property) => [property.key, shown(property)])),
  );
  const [saved, setSaved] = useState('');
  const save = useAction((body: Record<string, unknown>) => api.patch(`/contacts/${segment(contact.id)}`, body));

  async function submit(event: FormEvent) {
    event.preventDefault();
    setSaved('');
    const changed = properties.filter((property) => values[property.key] !== shown(property));
    if (changed.length === 0) return setSaved('Nothing to save.');
    const result = await save.run({
      properties: Object.fromEntries(
        changed.map((property) => [property.key, propertyValue(property.type, values[property.key] ?? '')]),
      ),
    });
    if (result !== undefined) {
      setSaved('Saved.');
      onSaved();
    }
  }

  const fields = properties.map((property) => `properties.${property.key}`);
  return (
    <form className="card" onSubmit={submit} aria-labelledby="properties-title" noValidate>
      <h2 id="properties-title">Properties</h2>
      {properties.length === 0 ? (
        <EmptyState title="No contact properties yet" action={<Link to="/contact-properties">Add a property</Link>}>
          Add properties on the Contact properties page; each then shows here with this contact&apos;s value.
        </EmptyState>
      ) : (
        <>
          {properties.map((property) => (
            <Field
              key={property.id}
              label={property.key}
              hint={property.type === 'number' ? 'A number.' : undefined}
              value={values[property.key] ?? ''}
              placeholder={property.fallback_value === null ? undefined : String(property.fallback_value)}
              inputMode={property.type === 'number' ? 'decimal' : undefined}
              onChange={(value) => (setValues({ ...values, [property.key]: value }), save.clearError())}
              error={fieldError(save.error, `properties.${property.key}`)}
            />
          ))}
          <ErrorBanner error={save.error} exceptFields={fields} />
          <div className="button-row">
            <Button type="submit" variant="primary" busy={save.busy} busyLabel="Saving…">
              Save properties
            </Button>
          </div>
          <p role="status" className="save-status">
            {saved}
          </p>
        </>
      )}
    </form>
  );
}

function SegmentChoice({
  contactId,
  item,
  member,
  onChanged,
}: {
  contactId: string;
  item: Segment;
  member: boolean;
  onChanged: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [requested, setRequested] = useState<boolean | null>(null);
  useEffect(() => setRequested(null), [member]);
  return (
    <li className="topic-choice">
      <CheckboxField
        label={item.name}
        checked={requested ?? member}
        disabled={busy}
        aria-busy={busy || undefined}
        error={error === undefined ? undefined : errorMessage(error)}
        onChange={async (checked) => {
          setBusy(true);
          setError(undefined);
          setRequested(checked);
          try {
            const path = `/contacts/${segment(contactId)}/segments/${segment(item.id)}`;
            await (checked ? api.post(path) : api.delete(path));
            onChanged();
          } catch (caught) {
            setError(caught);
            setRequested(null);
          } finally {
            setBusy(false);
          }
        }}
      />
    </li>
  );
}

function SegmentsSection({ contact }: { contact: Contact }) {
  const segments = useApiGet<ListResponse<Segment>>('/segments');
  const memberships = useApiGet<ListResponse<{ id: string }>>(`/contacts/${segment(contact.id)}/segments`);
  const member = new Set((memberships.data?.data ?? []).map((item) => item.id));
  const list = segments.data?.data ?? [];
  return (
    <section className="card" aria-labelledby="segments-title">
      <h2 id="segments-title">Segments</h2>
      <p className="muted">Checked: {contact.email} is in the segment. A change is saved at once.</p>
      <ErrorBanner error={segments.error} title="The segments could not be loaded" onRetry={segments.reload} />
      <ErrorBanner
        error={memberships.error}
        title="This contact's segments could not be loaded"
        onRetry={memberships.reload}
      />
      {(segments.loading && !segments.data) || (memberships.loading && !memberships.data) ? (
        <Loading label="Loading segments…" />
      ) : null}
      {segments.data && list.length === 0 ? (
        <EmptyState title="No segments yet" action={<Link to="/segments">Add a segment</Link>}>
          Add segments on the Segments page; each then shows here to put this contact in.
        </EmptyState>
      ) : null}
      {memberships.data ? (
        <ul className="topic-choices">
          {list.map((item) => (
            <SegmentChoice
              key={item.id}
              contactId={contact.id}
              item={item}
              member={member.has(item.id)}
              onChanged={() => {
                memberships.reload();
                segments.reload();
              }}
            />
          ))}
        </ul>
      ) : null}
    </section>
  );
}

export function ContactPage({ params }: PageProps) {
  const id = params.id ?? '';
  const contact = useApiGet<ContactWithProperties>(`/contacts/${segment(id)}`);
  const properties = useApiGet<ListResponse<ContactProperty>>('/contact-properties');
  const topics = useApiGet<ListResponse<ContactTopic>>(`/contacts/${segment(id)}/topics`);
  const data = contact.data;

  const topicList = topics.data?.data ?? [];
  return (
    <>
      <PageHeader
        title={data ? data.email : 'Contact'}
        description={
          <>
            <Link to="/topics">Topics &amp; contacts</Link>
            {data ? (
              <>
                {' · '}added <Timestamp value={data.created_at} />
              </>
            ) : null}
          </>
        }
      />
      <ErrorBanner error={contact.error} title="The contact could not be loaded" onRetry={contact.reload} />
      {contact.loading && !data ? <Loading label="Loading the contact…" /> : null}
      {data ? (
        <>
          <ContactForm key={data.id} contact={data} onSaved={contact.reload} />
          <section className="card" aria-labelledby="choices-title">
            <h2 id="choices-title">Topic subscriptions</h2>
            <p className="muted">
              Checked: topic sends reach {data.email}. A change is saved at once as the contact&apos;s own choice.
              {data.unsubscribed ? ' They are unsubscribed from everything, so no topic send reaches them now.' : ''}
            </p>
            <ErrorBanner error={topics.error} title="The topics could not be loaded" onRetry={topics.reload} />
            {topics.loading && !topics.data ? <Loading label="Loading topics…" /> : null}
            {topics.data && topicList.length === 0 ? (
              <EmptyState title="No topics yet" action={<Link to="/topics">Add a topic</Link>}>
                Add topics on the Topics &amp; contacts page; each then shows here to subscribe this contact.
              </EmptyState>
            ) : null}
            <ul className="topic-choices">
              {topicList.map((topic) => (
                <TopicChoice key={topic.id} contactId={data.id} topic={topic} onChanged={topics.reload} />
              ))}
            </ul>
          </section>
          <ErrorBanner
            error={properties.error}
            title="The contact properties could not be loaded"
            onRetry={properties.reload}
          />
          {properties.data ? (
            <PropertiesForm
              // Remade when the properties change, not when the contact is read again after a save (the
              // fields already hold what was saved, and the form's "Saved." stays).
              key={`${data.id} ${properties.data.data.map((property) => property.id).join(' ')}`}
              contact={data}
              properties={properties.data.data}
              onSaved={contact.reload}
            />
          ) : null}
          <SegmentsSection contact={data} />
          <section className="card" aria-labelledby="delete-title">
            <h2 id="delete-title">Delete</h2>
            <ConfirmButton
              question={`Delete ${data.email}? Their topic choices, properties and segments go too; topic sends no longer reach them.`}
              busyLabel="Deleting…"
              onConfirm={async () => {
                await api.delete(`/contacts/${segment(data.id)}`);
                navigate('/topics');
              }}
            >
              Delete contact
            </ConfirmButton>
          </section>
        </>
      ) : null}
    </>
  );
}
