import { DeliveryItem, type Delivery } from './WebhookDeliveries.tsx';
import { EnabledSwitch, TestAndReplay } from './WebhookControls.tsx';
import { useEffect, useState } from 'react';
import { api, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  EmptyState,
  ErrorBanner,
  Loading,
  PageHeader,
  SecretOnce,
  Timestamp,
  StatusBadge,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { EventPicker, eventsWords, type Webhook } from './WebhooksPage.tsx';

const POLL_MS = 2000;

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
