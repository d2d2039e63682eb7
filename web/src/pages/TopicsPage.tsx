import { useState, type FormEvent } from 'react';
import { api, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  CopyableId,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  Loading,
  PageHeader,
  RelativeTime,
  SelectField,
  StatusBadge,
  TextAreaField,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';

export type Subscription = 'opt_in' | 'opt_out';

interface Topic {
  id: string;
  name: string;
  description?: string;
  default_subscription: Subscription;
  created_at: string;
}

export interface Contact {
  id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  unsubscribed: boolean;
  topics: Array<{ id: string; subscription: Subscription }>;
  created_at: string;
}

const DEFAULTS: Array<{ value: Subscription; label: string }> = [
  { value: 'opt_in', label: 'Subscribed unless they opt out (opt_in)' },
  { value: 'opt_out', label: 'Not subscribed unless they opt in (opt_out)' },
];

const defaultWords = (value: Subscription) => (value === 'opt_in' ? 'Everyone until they opt out' : 'Only who opts in');

/** The topic form, to create one (no `topic`) or change one. */
function TopicForm({ topic, onDone }: { topic?: Topic; onDone: () => void }) {
  const [name, setName] = useState(topic?.name ?? '');
  const [description, setDescription] = useState(topic?.description ?? '');
  const [subscription, setSubscription] = useState<Subscription>(topic?.default_subscription ?? 'opt_in');
  const save = useAction((body: { name: string; description: string | null; default_subscription: Subscription }) =>
    topic ? api.patch(`/topics/${segment(topic.id)}`, body) : api.post('/topics', body),
  );

  async function submit(event: FormEvent) {
    event.preventDefault();
    const result = await save.run({
      name: name.trim(),
      description: description.trim() === '' ? null : description,
      default_subscription: subscription,
    });
    if (result !== undefined) {
      if (!topic) {
        setName('');
        setDescription('');
      }
      onDone();
    }
  }

  const titleId = topic ? `edit-topic-${topic.id}` : 'create-topic-title';
  return (
    <form className="card" onSubmit={submit} aria-labelledby={titleId} noValidate>
      <h3 id={titleId}>{topic ? `Change “${topic.name}”` : 'Add a topic'}</h3>
      <Field
        label="Topic name"
        value={name}
        maxLength={200}
        onChange={(value) => (setName(value), save.clearError())}
        error={fieldError(save.error, 'name')}
      />
      <TextAreaField
        label="Description"
        hint="Optional: what people get, in a line or two."
        value={description}
        rows={2}
        className="field-short"
        maxLength={1000}
        onChange={setDescription}
        error={fieldError(save.error, 'description')}
      />
      <SelectField
        label="Contacts who made no choice are"
        value={subscription}
        onChange={(value) => setSubscription(value as Subscription)}
        options={DEFAULTS}
        error={fieldError(save.error, 'default_subscription')}
      />
      <ErrorBanner error={save.error} exceptFields={['name', 'description', 'default_subscription']} />
      <div className="button-row">
        <Button type="submit" variant="primary" busy={save.busy} busyLabel="Saving…">
          {topic ? 'Save topic' : 'Add topic'}
        </Button>
        {topic ? (
          <Button variant="quiet" onClick={onDone}>
            Cancel
          </Button>
        ) : null}
      </div>
    </form>
  );
}

function TopicsSection() {
  const topics = useApiGet<ListResponse<Topic>>('/topics');
  const [editing, setEditing] = useState<Topic | null>(null);
  const [adding, setAdding] = useState<boolean | undefined>(undefined);
  const list = topics.data?.data ?? [];
  const showForm = adding ?? (topics.data !== undefined && list.length === 0);
  return (
    <section aria-labelledby="topics-title" className="audience-section">
      <div className="section-head">
        <h2 id="topics-title">Topics</h2>
        <Button aria-expanded={showForm} onClick={() => setAdding(!showForm)}>
          {showForm ? 'Close the topic form' : 'Add a topic'}
        </Button>
      </div>
      {editing ? (
        <TopicForm
          key={editing.id}
          topic={editing}
          onDone={() => {
            setEditing(null);
            topics.reload();
          }}
        />
      ) : null}
      <ErrorBanner error={topics.error} title="The topics could not be loaded" onRetry={topics.reload} />
      {topics.loading && !topics.data ? <Loading label="Loading topics…" /> : null}
      {topics.data && list.length === 0 ? (
        <EmptyState title="No topics yet">
          Add one for each kind of mail people can choose to receive (a newsletter, product news), then send with its{' '}
          <code>topic_id</code>.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Topics"
          captionHidden
          rows={list}
          rowKey={(topic) => topic.id}
          columns={[
            {
              header: 'Topic',
              cell: (topic) => (
                <>
                  <strong>{topic.name}</strong>
                  {topic.description ? <span className="cell-note">{topic.description}</span> : null}
                </>
              ),
            },
            { header: 'Reaches', cell: (topic) => defaultWords(topic.default_subscription) },
            {
              header: 'ID',
              className: 'hide-narrow',
              cell: (topic) => <CopyableId id={topic.id} of={topic.name} />,
            },
            {
              header: 'Actions',
              cell: (topic) => (
                <div className="button-row">
                  <Button onClick={() => setEditing(topic)}>
                    Edit<span className="visually-hidden"> {topic.name}</span>
                  </Button>
                  <ConfirmButton
                    question={`Delete “${topic.name}”? Every contact's choice for it goes too.`}
                    busyLabel="Deleting…"
                    onConfirm={async () => {
                      await api.delete(`/topics/${segment(topic.id)}`);
                      if (editing?.id === topic.id) setEditing(null);
                      topics.reload();
                    }}
                  >
                    <span>
                      Delete<span className="visually-hidden"> {topic.name}</span>
                    </span>
                  </ConfirmButton>
                </div>
              ),
            },
          ]}
        />
      ) : null}
      {showForm ? (
        <TopicForm
          onDone={() => {
            setAdding(true);
            topics.reload();
          }}
        />
      ) : null}
    </section>
  );
}

const PAGE_SIZE = 20;

function ContactsSection() {
  // Contacts are listed oldest first, a page after the last id of the one before: keep the way back.
  const [cursors, setCursors] = useState<string[]>([]);
  const after = cursors.at(-1);
  const contacts = useApiGet<ListResponse<Contact>>('/contacts', { limit: PAGE_SIZE, after });
  const [email, setEmail] = useState('');
  const [firstName, setFirstName] = useState('');
  const [lastName, setLastName] = useState('');
  const create = useAction((body: { email: string; first_name: string | null; last_name: string | null }) =>
    api.post<{ id: string }>('/contacts', body),
  );

  async function submit(event: FormEvent) {
    event.preventDefault();
    const result = await create.run({
      email: email.trim(),
      first_name: firstName.trim() || null,
      last_name: lastName.trim() || null,
    });
    if (result) navigate(`/contacts/${result.id}`);
  }

  const [adding, setAdding] = useState<boolean | undefined>(undefined);
  const list = contacts.data?.data ?? [];
  const showForm = adding ?? (contacts.data !== undefined && list.length === 0 && cursors.length === 0);
  return (
    <section aria-labelledby="contacts-title" className="audience-section">
      <div className="section-head">
        <h2 id="contacts-title">Contacts</h2>
        <Button aria-expanded={showForm} onClick={() => setAdding(!showForm)}>
          {showForm ? 'Close the contact form' : 'Add a contact'}
        </Button>
      </div>
      <ErrorBanner error={contacts.error} title="The contacts could not be loaded" onRetry={contacts.reload} />
      {contacts.loading && !contacts.data ? <Loading label="Loading contacts…" /> : null}
      {contacts.data && list.length === 0 && cursors.length === 0 ? (
        <EmptyState title="No contacts yet">
          Add the people who may receive topic mail below: a topic send reaches only contacts subscribed to it.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Contacts"
          captionHidden
          rows={list}
          rowKey={(contact) => contact.id}
          columns={[
            {
              header: 'Email',
              cell: (contact) => (
                <Link to={`/contacts/${contact.id}`} className="break-anywhere">
                  {contact.email}
                </Link>
              ),
            },
            {
              header: 'Name',
              className: 'hide-narrow',
              cell: (contact) => [contact.first_name, contact.last_name].filter(Boolean).join(' ') || '—',
            },
            {
              header: 'Status',
              cell: (contact) =>
                contact.unsubscribed ? (
                  <StatusBadge tone="failed">Unsubscribed from all</StatusBadge>
                ) : (
                  <StatusBadge tone="verified">Subscribed</StatusBadge>
                ),
            },
            {
              header: 'Added',
              className: 'nowrap hide-narrow',
              cell: (contact) => <RelativeTime value={contact.created_at} />,
            },
          ]}
        />
      ) : null}
      {cursors.length > 0 || contacts.data?.has_more ? (
        <nav className="pager" aria-label="Contacts pages">
          <Button disabled={cursors.length === 0 || contacts.loading} onClick={() => setCursors(cursors.slice(0, -1))}>
            ← Previous
          </Button>
          <Button
            disabled={!contacts.data?.has_more || contacts.loading}
            onClick={() => {
              const last = list.at(-1);
              if (last) setCursors([...cursors, last.id]);
            }}
          >
            Next →
          </Button>
        </nav>
      ) : null}
      {showForm ? (
        <form className="card" onSubmit={submit} aria-labelledby="create-contact-title" noValidate>
          <h3 id="create-contact-title">Add a contact</h3>
          <Field
            label="Email"
            type="email"
            value={email}
            onChange={(value) => (setEmail(value), create.clearError())}
            error={fieldError(create.error, 'email')}
            autoComplete="off"
          />
          <div className="form-pair">
            <Field
              label="First name"
              value={firstName}
              onChange={setFirstName}
              error={fieldError(create.error, 'first_name')}
            />
            <Field
              label="Last name"
              value={lastName}
              onChange={setLastName}
              error={fieldError(create.error, 'last_name')}
            />
          </div>
          <ErrorBanner error={create.error} exceptFields={['email', 'first_name', 'last_name']} />
          <Button type="submit" variant="primary" busy={create.busy} busyLabel="Adding…">
            Add contact
          </Button>
        </form>
      ) : null}
    </section>
  );
}

export function TopicsPage(_props: PageProps) {
  return (
    <>
      <PageHeader
        title="Topics & contacts"
        description="The topics people can subscribe to, and the contacts with their choices."
      />
      <TopicsSection />
      <ContactsSection />
    </>
  );
}
