import { useEffect, useState } from 'react';
import { api, errorMessage, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  EmptyState,
  ErrorBanner,
  Loading,
  PageHeader,
  RelativeTime,
  SecretOnce,
  Timestamp,
  StatusBadge,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { EventPicker, eventsWords, type Webhook } from './WebhooksPage.tsx';

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
  attempts: Attempt[];
  created_at: string;
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
          {isNew ? <span className="muted"> (replay)</span> : null}
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
      {delivery.attempts.length === 0 ? (
        <p className="muted">Not attempted yet.</p>
      ) : (
        <ol className="attempts">
          {delivery.attempts.map((attempt) => (
            <AttemptRow key={attempt.attempt} attempt={attempt} />
          ))}
        </ol>
      )}
      {error !== undefined ? (
        <p className="field-error" role="alert">
          {errorMessage(error)}
        </p>
      ) : null}
    </li>
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
  const update = useAction((changes: { enabled?: boolean; events?: string[] }) => api.patch<Webhook>(path, changes));

  const data = webhook.data;
  const list = deliveries.data?.data ?? [];
  const underWay = list.some((delivery) => delivery.status === 'pending');
  const { reload: reloadDeliveries, loading: deliveriesLoading } = deliveries;
  useEffect(() => {
    if (!underWay || deliveriesLoading) return;
    const timer = setTimeout(reloadDeliveries, POLL_MS);
    return () => clearTimeout(timer);
  }, [underWay, deliveriesLoading, reloadDeliveries, list]);

  async function change(changes: { enabled?: boolean; events?: string[] }) {
    if (await update.run(changes)) {
      webhook.reload();
      if (changes.events) setEvents(undefined);
    }
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
            <div className="button-row">
              <Button
                busy={update.busy}
                busyLabel="Saving…"
                onClick={() => change({ enabled: data.status !== 'enabled' })}
              >
                {data.status === 'enabled' ? 'Disable endpoint' : 'Enable endpoint'}
              </Button>
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
