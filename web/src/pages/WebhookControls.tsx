import { useId, useState, type FormEvent } from 'react';
import { api, fieldError } from '../api.ts';
import { Button, ErrorBanner, Field, SelectField } from '../components/index.ts';
import { useAction } from '../hooks.ts';
import { EVENT_GROUPS } from './WebhooksPage.tsx';

// The controls of an endpoint's page: its enabled switch, and sending a test event or replaying what failed.

function localInputValue(date: Date): string {
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}

export function EnabledSwitch({
  enabled,
  busy,
  onChange,
}: {
  enabled: boolean;
  busy: boolean;
  onChange: (on: boolean) => void;
}) {
  const id = useId();
  return (
    <div className="switch-field">
      <button
        id={id}
        type="button"
        role="switch"
        className="switch"
        aria-checked={enabled}
        aria-describedby={`${id}-hint`}
        disabled={busy}
        onClick={() => onChange(!enabled)}
      >
        <span className="switch-knob" aria-hidden="true" />
      </button>
      <label htmlFor={id}>Send events to this endpoint</label>
      <p className="field-hint" id={`${id}-hint`}>
        Off: new events are not sent here, and deliveries still waiting fail (&ldquo;Not sent: the endpoint was
        disabled&rdquo;); replay them once it is on again.
      </p>
    </div>
  );
}

const ALL_TYPES = EVENT_GROUPS.flatMap((group) => group.types);

/** Sends a test event of a chosen type, and replays every failed delivery since a chosen time. */
export function TestAndReplay({
  path,
  enabled,
  onQueued,
}: {
  path: string;
  enabled: boolean;
  onQueued: (announcement: string) => void;
}) {
  const [type, setType] = useState('email.delivered');
  const [since, setSince] = useState(() => localInputValue(new Date(Date.now() - 24 * 3600_000)));
  const [sinceError, setSinceError] = useState<string | undefined>(undefined);
  const sendTest = useAction((chosen: string) => api.post<{ id: string }>(`${path}/test`, { type: chosen }));
  // One request replays a bounded batch and says whether failed deliveries remain: ask until none do.
  const replayAll = useAction(async (from: string) => {
    let replayed = 0;
    for (;;) {
      const batch = await api.post<{ replayed: number; has_more: boolean }>(`${path}/deliveries/replay`, {
        since: from,
      });
      replayed += batch.replayed;
      if (!batch.has_more) return { replayed };
    }
  });

  async function test(event: FormEvent) {
    event.preventDefault();
    if (await sendTest.run(type)) onQueued(`A test ${type} event was queued; it shows at the top of the deliveries.`);
  }

  async function replay(event: FormEvent) {
    event.preventDefault();
    const from = new Date(since);
    if (since === '' || Number.isNaN(from.getTime())) {
      setSinceError('Choose a date and time.');
      return;
    }
    setSinceError(undefined);
    const result = await replayAll.run(from.toISOString());
    if (!result) return;
    onQueued(
      result.replayed === 0
        ? 'No failed delivery to replay since then (deliveries already replayed are not sent again).'
        : `${result.replayed} failed ${result.replayed === 1 ? 'delivery was' : 'deliveries were'} queued again.`,
    );
  }

  return (
    <section className="card" aria-labelledby="test-replay-title">
      <h2 id="test-replay-title">Test and replay</h2>
      {!enabled ? <p className="muted">Turn the endpoint on to send it a test event or replay deliveries.</p> : null}
      <form className="inline-form" onSubmit={test} aria-label="Send a test event" noValidate>
        <SelectField
          label="Event type"
          hint='Signed like any event, with sample data, its body marked "test": true.'
          value={type}
          onChange={(value) => (setType(value), sendTest.clearError())}
          options={ALL_TYPES.map((value) => ({ value, label: value }))}
          error={fieldError(sendTest.error, 'type')}
        />
        <Button type="submit" busy={sendTest.busy} busyLabel="Sending…" disabled={!enabled}>
          Send test event
        </Button>
      </form>
      <ErrorBanner error={sendTest.error} title="The test event could not be sent" exceptFields={['type']} />
      <form className="inline-form" onSubmit={replay} aria-label="Replay failed deliveries" noValidate>
        <Field
          label="Failed since"
          hint="Every failed delivery from then on is sent again, once (a second click finds them replayed)."
          type="datetime-local"
          value={since}
          onChange={(value) => (setSince(value), setSinceError(undefined), replayAll.clearError())}
          error={sinceError ?? fieldError(replayAll.error, 'since')}
        />
        <Button type="submit" busy={replayAll.busy} busyLabel="Replaying…" disabled={!enabled}>
          Replay all failed
        </Button>
      </form>
      <ErrorBanner error={replayAll.error} title="The deliveries could not be replayed" exceptFields={['since']} />
    </section>
  );
}
