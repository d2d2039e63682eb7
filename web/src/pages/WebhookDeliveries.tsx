import { useState } from 'react';
import { errorMessage } from '../api.ts';
import { Button, RelativeTime, Timestamp, StatusBadge } from '../components/index.ts';

// An endpoint's deliveries as its page lists them: each with its status, its attempts and the answer of the
// last.

interface Attempt {
  attempt: number;
  status_code: number | null;
  duration_ms: number | null;
  response: string | null;
  error: string | null;
  created_at: string;
}

export interface Delivery {
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

const DELIVERY_WORDS: Record<string, string> = {
  pending: 'Pending',
  succeeded: 'Succeeded',
  failed: 'Failed',
};

/** Deliveries still under way are read again this often, so their attempts appear without a reload. */

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

export function DeliveryItem({
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
