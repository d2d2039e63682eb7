import { useEffect, useId, useState, type FormEvent } from 'react';
import { api, errorMessage, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  EmptyState,
  ErrorBanner,
  Field,
  Loading,
  PageHeader,
  RelativeTime,
  SecretOnce,
  SelectField,
  Timestamp,
  StatusBadge,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { EVENT_GROUPS, EventPicker, eventsWords, type Webhook } from './WebhooksPage.tsx';

interface Attempt {
  attempt: number;
  status_code: number | null;
  duration_ms: number | null;
  response: string | null;
  error: string | null;
  created_at: string;
}

interface Delivery {
  id: string;
  event_id: string;
  type: string;
  /** pending (queued or retrying), succeeded, failed (given up). */
  status: string;
  /** endpoint_disabled: failed without an attempt because the endpoint was disabled while it waited. */
  failure: string | null;
  /** The delivery this one sends again, for a replay. */
  replay_of: string | null;
  test: boolean;
  /** The JSON body the delivery sends. */
  payload: unknown;
  attempts: Attempt[];
  created_at: string;
}

const FAILURE_WORDS: Record<string, string> = {
  endpoint_disabled: 'Not sent: the endpoint was disabled while this waited. Replay it once the endpoint is on.',
};

/** A datetime-local input's value for a moment, in the browser's time zone. */
function localInputValue(date: Date): string {
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}

const DELIVERY_WORDS: Record<string, string> = {
  pending: 'Pending',
  succeeded: 'Succeeded',
  failed: 'Failed',
};

/** Deliveries still under way are read again this often, so their attempts appear without a reload. */
const POLL_MS = 2000;

function AttemptRow({ attempt }: { attempt: Attempt }) {
  const outcome =
    attempt.status_code !== null ? `HTTP ${attempt.status_code}` : attempt.error ? 'No answer' : 'No status';
  return (
    <li className="attempt">
      <span className="attempt-head">
        Attempt {attempt.attempt}: <strong>{outcome}</strong>
        {attempt.duration_ms !== null ? ` in ${attempt.duration_ms} ms` : ''} · <Timestamp value={attempt.created_at} />
      </span>
      {attempt.error ? <span className="attempt-error">{attempt.error}</span> : null}
      {attempt.response ? (
        <span className="attempt-response">
          Answer: <code>{attempt.response}</code>
        </span>
      ) : null}
    </li>
  );
}

function DeliveryItem({
  delivery,
  isNew,
  onReplay,
}: {
  delivery: Delivery;
  isNew: boolean;
  onReplay: (delivery: Delivery) => Promise<void>;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  return (
    <li className={`delivery card${isNew ? ' delivery-new' : ''}`} aria-label={`Delivery of ${delivery.type}`}>
      <div className="delivery-head">
        <span>
          <code>{delivery.type}</code>{' '}
          <StatusBadge tone={delivery.status}>{DELIVERY_WORDS[delivery.status] ?? delivery.status}</StatusBadge>
          {delivery.test ? <span className="muted"> (test)</span> : null}
          {isNew || delivery.replay_of ? <span className="muted"> (replay)</span> : null}
        </span>
        <span className="muted">
          <RelativeTime value={delivery.created_at} /> · <code>{delivery.event_id}</code>
        </span>
        <Button
          busy={busy}
          busyLabel="Replaying…"
          onClick={async () => {
            setBusy(true);
            setError(undefined);
            try {
              await onReplay(delivery);
            } catch (caught) {
              setError(caught);
            } finally {
              setBusy(false);
            }
          }}
        >
          Replay<span className="visually-hidden"> {delivery.type}</span>
        </Button>
      </div>
      {delivery.failure ? <p className="attempt-error">{FAILURE_WORDS[delivery.failure] ?? delivery.failure}</p> : null}
      {delivery.attempts.length === 0 ? (
        delivery.failure ? null : (
          <p className="muted">Not attempted yet.</p>
        )
      ) : (
        <ol className="attempts">
          {delivery.attempts.map((attempt) => (
            <AttemptRow key={attempt.attempt} attempt={attempt} />
          ))}
        </ol>
      )}
      <details className="delivery-payload">
        <summary>
          Payload<span className="visually-hidden"> of {delivery.type}</span>
        </summary>
        <pre className="code-block" tabIndex={0} aria-label={`The JSON body of ${delivery.type}`}>
          {JSON.stringify(delivery.payload, null, 2)}
        </pre>
      </details>
      {error !== undefined ? (
        <p className="field-error" role="alert">
          {errorMessage(error)}
        </p>
      ) : null}
    </li>
  );
}

/** The endpoint's on/off switch: off, no new deliveries, and the ones waiting fail (they can be replayed). */
function EnabledSwitch({
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
function TestAndReplay({
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

export function WebhookPage({ params }: PageProps) {
  const id = params.id ?? '';
  const path = `/webhooks/${segment(id)}`;
  const webhook = useApiGet<Webhook>(path);
  const deliveries = useApiGet<ListResponse<Delivery>>(`${path}/deliveries`);
  const [secret, setSecret] = useState<string | null>(null);
  const [events, setEvents] = useState<string[] | null | undefined>(undefined);
  const [replayed, setReplayed] = useState<string[]>([]);
  const [announcement, setAnnouncement] = useState('');
  const update = useAction((changes: { status?: Webhook['status']; events?: string[] }) =>
    api.patch<Webhook>(path, changes),
  );

  const data = webhook.data;
  const list = deliveries.data?.data ?? [];
  const underWay = list.some((delivery) => delivery.status === 'pending');
  const { reload: reloadDeliveries, loading: deliveriesLoading } = deliveries;
  useEffect(() => {
    if (!underWay || deliveriesLoading) return;
    const timer = setTimeout(reloadDeliveries, POLL_MS);
    return () => clearTimeout(timer);
  }, [underWay, deliveriesLoading, reloadDeliveries, list]);

  async function change(changes: { status?: Webhook['status']; events?: string[] }) {
    if (await update.run(changes)) {
      webhook.reload();
      if (changes.events) setEvents(undefined);
      // Turning it off fails the deliveries still waiting: show them so.
      if (changes.status) deliveries.reload();
    }
  }

  function queued(message: string) {
    setAnnouncement(message);
    deliveries.reload();
  }

  async function replay(delivery: Delivery) {
    const result = await api.post<{ id: string }>(`${path}/deliveries/${segment(delivery.id)}/replay`);
    setReplayed((previous) => [...previous, result.id]);
    setAnnouncement(`${delivery.type} was queued again as a new delivery; it shows at the top of the list.`);
    deliveries.reload();
  }

  return (
    <>
      <PageHeader
        title="Webhook endpoint"
        description={
          <>
            <Link to="/webhooks">All endpoints</Link>
            {data ? (
              <>
                {' · '}
                <span className="break-anywhere">{data.endpoint}</span>
              </>
            ) : null}
          </>
        }
      />
      <ErrorBanner error={webhook.error} title="The endpoint could not be loaded" onRetry={webhook.reload} />
      {webhook.loading && !data ? <Loading label="Loading the endpoint…" /> : null}
      {data ? (
        <>
          <section className="card" aria-labelledby="settings-title">
            <h2 id="settings-title">Settings</h2>
            <dl className="facts">
              <dt>URL</dt>
              <dd className="break-anywhere">
                <code>{data.endpoint}</code>
              </dd>
              <dt>Status</dt>
              <dd>
                <StatusBadge tone={data.status}>
                  {data.status === 'enabled' ? 'Enabled' : 'Disabled: events are not sent'}
                </StatusBadge>
              </dd>
              <dt>Events</dt>
              <dd>{eventsWords(data.events)}</dd>
              <dt>Added</dt>
              <dd>
                <Timestamp value={data.created_at} />
              </dd>
            </dl>
            <EnabledSwitch
              enabled={data.status === 'enabled'}
              busy={update.busy}
              onChange={(on) => change({ status: on ? 'enabled' : 'disabled' })}
            />
            <div className="button-row">
              {events === undefined ? (
                <Button onClick={() => setEvents(data.events.length === 0 ? null : data.events)}>Change events</Button>
              ) : null}
            </div>
            {events !== undefined ? (
              <div className="edit-events">
                <EventPicker value={events} onChange={setEvents} error={fieldError(update.error, 'events')} />
                <div className="button-row">
                  <Button
                    variant="primary"
                    busy={update.busy}
                    busyLabel="Saving…"
                    disabled={events !== null && events.length === 0}
                    onClick={() => change({ events: events ?? [] })}
                  >
                    Save events
                  </Button>
                  <Button variant="quiet" onClick={() => setEvents(undefined)}>
                    Cancel
                  </Button>
                </div>
              </div>
            ) : null}
            <ErrorBanner error={update.error} title="The endpoint could not be changed" exceptFields={['events']} />
          </section>

          <TestAndReplay path={path} enabled={data.status === 'enabled'} onQueued={queued} />

          <section aria-labelledby="deliveries-title">
            <div className="section-head">
              <h2 id="deliveries-title">Recent deliveries</h2>
              <Button busy={deliveries.loading} busyLabel="Refreshing…" onClick={deliveries.reload}>
                Refresh
              </Button>
            </div>
            <p role="status" className="muted">
              {announcement}
              {underWay ? ' Deliveries under way are refreshed every few seconds.' : ''}
            </p>
            <ErrorBanner
              error={deliveries.error}
              title="The deliveries could not be loaded"
              onRetry={deliveries.reload}
            />
            {deliveries.data && list.length === 0 ? (
              <EmptyState title="No deliveries yet">
                Events are sent here as they happen: send an email, or add a domain or a contact, and its delivery shows
                here with each attempt.
              </EmptyState>
            ) : null}
            <ol className="deliveries">
              {list.map((delivery) => (
                <DeliveryItem
                  key={delivery.id}
                  delivery={delivery}
                  isNew={replayed.includes(delivery.id)}
                  onReplay={replay}
                />
              ))}
            </ol>
          </section>

          <section className="card" aria-labelledby="secret-title">
            <h2 id="secret-title">Signing secret</h2>
            <p className="muted">
              A new secret is shown once. For 24 hours after rotating, deliveries are signed with both the old and the
              new secret, so you can deploy the new one to your server without missing an event.
            </p>
            <ConfirmButton
              variant="secondary"
              question="Rotate the signing secret? The old one keeps signing for 24 hours only."
              busyLabel="Rotating…"
              onConfirm={async () => {
                const result = await api.post<{ signing_secret: string }>(`${path}/signing-secret/rotate`);
                setSecret(result.signing_secret);
              }}
            >
              Rotate secret
            </ConfirmButton>
            {secret ? <SecretOnce label="signing secret" secret={secret} onDone={() => setSecret(null)} /> : null}
          </section>

          <section className="card" aria-labelledby="delete-title">
            <h2 id="delete-title">Delete</h2>
            <ConfirmButton
              question="Delete this endpoint? Events still queued for it are dropped."
              busyLabel="Deleting…"
              onConfirm={async () => {
                await api.delete(path);
                navigate('/webhooks');
              }}
            >
              Delete endpoint
            </ConfirmButton>
          </section>
        </>
      ) : null}
    </>
  );
}
