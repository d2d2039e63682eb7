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

export function ContactPage({ params }: PageProps) {
  const id = params.id ?? '';
  const contact = useApiGet<Contact>(`/contacts/${segment(id)}`);
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
          <section className="card" aria-labelledby="delete-title">
            <h2 id="delete-title">Delete</h2>
            <ConfirmButton
              question={`Delete ${data.email}? Their topic choices go too; topic sends no longer reach them.`}
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
