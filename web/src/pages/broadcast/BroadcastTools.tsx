import { useState, type FormEvent } from 'react';
import { api, fieldError, segment, type ListResponse } from '../../api.ts';
import { Button, ConfirmButton, ErrorBanner, Field, formatTimestamp } from '../../components/index.ts';
import { useAction, useApiGet } from '../../hooks.ts';
import { Link } from '../../router.tsx';
import type { Broadcast } from './types.ts';

// What a saved broadcast that has not begun sending offers besides its form: a preview as one contact of
// its segment would receive it, a test copy to one address, and sending it now or at a chosen time.

interface Rendered {
  subject: string | null;
  html: string | null;
  text: string | null;
}

interface SegmentContact {
  id: string;
  email: string;
}

/** The preview of the saved broadcast as a contact of its segment receives it (placeholders filled). */
export function PreviewAsContact({ broadcast }: { broadcast: Broadcast }) {
  const [email, setEmail] = useState('');
  const [rendered, setRendered] = useState<Rendered | null>(null);
  const [emailError, setEmailError] = useState<string | undefined>(undefined);
  const members = useApiGet<ListResponse<SegmentContact>>(
    broadcast.segment_id ? `/segments/${segment(broadcast.segment_id)}/contacts` : null,
    { limit: 100 },
  );
  // A contact of the segment by its id; any other address as given (a contact's, or fallbacks for the rest).
  const preview = useAction(async (address: string) => {
    const listed = members.data?.data.find((contact) => contact.email.toLowerCase() === address.toLowerCase());
    const body = listed ? { contact_id: listed.id } : { email: address };
    return api.post<Rendered>(`/broadcasts/${segment(broadcast.id)}/preview`, body);
  });

  async function submit(event: FormEvent) {
    event.preventDefault();
    const address = email.trim();
    if (!address) {
      setEmailError('Give the email address of one of your contacts.');
      return;
    }
    setEmailError(undefined);
    const result = await preview.run(address);
    if (result) setRendered(result);
  }

  const listId = `segment-contacts-${broadcast.id}`;
  return (
    <section className="card" aria-labelledby="preview-title">
      <h2 id="preview-title">Preview as a contact</h2>
      <form className="inline-form" onSubmit={submit} noValidate>
        <Field
          label="Contact's email"
          hint="A contact of the segment (pick one from the list) sees the saved broadcast with their name and properties filled in; an address that is no contact's sees the fallbacks."
          type="email"
          value={email}
          list={listId}
          onChange={(value) => (setEmail(value), setEmailError(undefined), preview.clearError())}
          error={emailError ?? fieldError(preview.error, 'contact_id') ?? fieldError(preview.error, 'email')}
          autoComplete="off"
          spellCheck={false}
        />
        <datalist id={listId}>
          {(members.data?.data ?? []).map((contact) => (
            <option key={contact.id} value={contact.email} />
          ))}
        </datalist>
        <Button type="submit" busy={preview.busy} busyLabel="Rendering…">
          Preview
        </Button>
      </form>
      <ErrorBanner
        error={preview.error}
        title="The preview could not be rendered"
        exceptFields={['contact_id', 'email']}
      />
      {rendered ? (
        <div className="rendered" aria-live="polite">
          <h3>Subject</h3>
          <p className="rendered-subject">{rendered.subject || <span className="muted">No subject</span>}</p>
          <h3>HTML</h3>
          {rendered.html ? (
            // Sandboxed: no script runs, and under the dashboard's policy nothing remote loads.
            <iframe className="rendered-html" title="Preview of the HTML" sandbox="" srcDoc={rendered.html} />
          ) : (
            <p className="muted">No HTML part.</p>
          )}
          <h3>Text</h3>
          {rendered.text ? (
            <pre className="rendered-text">{rendered.text}</pre>
          ) : (
            <p className="muted">No text part.</p>
          )}
        </div>
      ) : null}
    </section>
  );
}

/** A test copy of the saved broadcast to one address; it is an ordinary message, listed under Emails. */
export function SendTest({ broadcast }: { broadcast: Broadcast }) {
  const [to, setTo] = useState('');
  const [sent, setSent] = useState<{ id: string; to: string } | null>(null);
  const test = useAction((address: string) =>
    api.post<{ id: string }>(`/broadcasts/${segment(broadcast.id)}/test`, { to: address }),
  );

  async function submit(event: FormEvent) {
    event.preventDefault();
    setSent(null);
    const address = to.trim();
    const result = await test.run(address);
    if (result) setSent({ id: result.id, to: address });
  }

  return (
    <section className="card" aria-labelledby="test-title">
      <h2 id="test-title">Send a test</h2>
      <form className="inline-form" onSubmit={submit} noValidate>
        <Field
          label="Send a test to"
          hint="One copy of the saved broadcast to this address; the segment's contacts get nothing."
          type="email"
          value={to}
          onChange={(value) => (setTo(value), test.clearError())}
          error={fieldError(test.error, 'to')}
          autoComplete="email"
          spellCheck={false}
        />
        <Button type="submit" busy={test.busy} busyLabel="Sending…">
          Send test
        </Button>
      </form>
      <ErrorBanner error={test.error} title="The test could not be sent" exceptFields={['to']} />
      <p role="status" className="form-result">
        {sent ? (
          <>
            Test sent to {sent.to}. <Link to={`/emails/${encodeURIComponent(sent.id)}`}>Follow it</Link>.
          </>
        ) : null}
      </p>
    </section>
  );
}

/** A local date and time from a datetime-local field as the instant the API takes, or undefined. */
function instantOf(local: string): string | undefined {
  if (!local) return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** Sending now, scheduling, or (when scheduled) back to a draft. */
export function SendBroadcast({
  broadcast,
  audience,
  onChanged,
}: {
  broadcast: Broadcast;
  /** The segment's name and size, for the question asked before sending. */
  audience: string;
  onChanged: () => void;
}) {
  const [at, setAt] = useState('');
  const [atError, setAtError] = useState<string | undefined>(undefined);
  const path = `/broadcasts/${segment(broadcast.id)}`;
  const schedule = useAction((scheduledAt: string) => api.post(`${path}/send`, { scheduled_at: scheduledAt }));
  const cancel = useAction(() => api.post(`${path}/cancel`, {}));

  async function submitSchedule(event: FormEvent) {
    event.preventDefault();
    const instant = instantOf(at);
    if (!instant) {
      setAtError('Choose a date and a time.');
      return;
    }
    setAtError(undefined);
    if ((await schedule.run(instant)) !== undefined) onChanged();
  }

  if (broadcast.status === 'scheduled') {
    return (
      <section className="card" aria-labelledby="send-title">
        <h2 id="send-title">Scheduled</h2>
        <p>
          It will be sent to {audience} at{' '}
          {broadcast.scheduled_at ? formatTimestamp(new Date(broadcast.scheduled_at)) : 'the chosen time'}. It can still
          be changed until then.
        </p>
        <ErrorBanner error={cancel.error} title="The schedule could not be canceled" />
        <Button
          busy={cancel.busy}
          busyLabel="Canceling…"
          onClick={async () => {
            if ((await cancel.run()) !== undefined) onChanged();
          }}
        >
          Cancel schedule
        </Button>
      </section>
    );
  }

  return (
    <section className="card" aria-labelledby="send-title">
      <h2 id="send-title">Send</h2>
      <p className="muted">Sends the saved broadcast: save changes in the form first.</p>
      <ConfirmButton
        variant="primary"
        question={`Send “${broadcast.name || broadcast.subject || 'this broadcast'}” to ${audience} now?`}
        busyLabel="Sending…"
        onConfirm={async () => {
          await api.post(`${path}/send`, {});
          onChanged();
        }}
      >
        Send now
      </ConfirmButton>
      <form className="inline-form" onSubmit={submitSchedule} noValidate>
        <Field
          label="Send at"
          hint="Your local time."
          type="datetime-local"
          value={at}
          onChange={(value) => (setAt(value), setAtError(undefined), schedule.clearError())}
          error={atError ?? fieldError(schedule.error, 'scheduled_at')}
        />
        <Button type="submit" busy={schedule.busy} busyLabel="Scheduling…">
          Schedule
        </Button>
      </form>
      <ErrorBanner
        error={schedule.error}
        title="The broadcast could not be scheduled"
        exceptFields={['scheduled_at']}
      />
    </section>
  );
}
