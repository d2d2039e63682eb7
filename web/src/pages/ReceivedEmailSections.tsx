import {
  authenticationRows,
  type CheckRow,
  type ReceivedAttachment,
  type ReceivedEmail,
  type RouteOutcome,
} from './received-email-model.ts';
import { type ListResponse } from '../api.ts';
import {
  DataTable,
  ErrorBanner,
  HtmlPreview,
  Loading,
  RelativeTime,
  StatusBadge,
  Timestamp,
  webUrl,
  type Column,
  DetailRow,
} from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import { formatSize } from './EmailPage.tsx';
import { actionText } from './inbound-route-model.ts';
import type { Webhook } from './WebhooksPage.tsx';

// The sections of a received message's page, each a card: details, checks, handling, content, attachments,
// source.

/** An authentication result's colour: a pass reads green, a failure red, anything else plain. */
function resultTone(result: string | undefined): string {
  switch (result) {
    case 'pass':
      return 'verified';
    case 'fail':
    case 'softfail':
    case 'permerror':
      return 'failed';
    case 'temperror':
      return 'pending';
    default:
      return 'other';
  }
}

function Result({ result }: { result: string | undefined }) {
  return <StatusBadge tone={resultTone(result)}>{result || 'none'}</StatusBadge>;
}

const addresses = (list: string[] | undefined) =>
  list && list.length ? <span className="break-anywhere">{list.join(', ')}</span> : <span className="muted">—</span>;

export function Details({ email }: { email: ReceivedEmail }) {
  return (
    <section className="card" aria-labelledby="received-details">
      <h2 id="received-details">Details</h2>
      <dl className="details">
        <DetailRow label="From">{addresses([email.from])}</DetailRow>
        <DetailRow label="To">{addresses(email.to)}</DetailRow>
        <DetailRow label="Cc">{addresses(email.cc)}</DetailRow>
        <DetailRow label="Reply to">{addresses(email.reply_to)}</DetailRow>
        <DetailRow label="Received for">{addresses(email.received_for)}</DetailRow>
        {email.envelope ? (
          <DetailRow label="Handed over by">
            <span className="break-anywhere">
              {email.envelope.client_address || 'an unknown client'}
              {email.envelope.helo ? ` (HELO ${email.envelope.helo})` : ''},{' '}
              {email.envelope.tls ? 'under TLS' : 'not encrypted'}; MAIL FROM{' '}
              {email.envelope.mail_from ? email.envelope.mail_from : '<> (a bounce)'}
            </span>
          </DetailRow>
        ) : null}
        <DetailRow label="Subject">
          <span className="break-anywhere">{email.subject || '(no subject)'}</span>
        </DetailRow>
        <DetailRow label="Received">
          <Timestamp value={email.created_at} /> (<RelativeTime value={email.created_at} />)
        </DetailRow>
        <DetailRow label="In reply to">
          {email.in_reply_to_email_id ? (
            <Link to={`/emails/${encodeURIComponent(email.in_reply_to_email_id)}`}>The sent message it answers</Link>
          ) : (
            <span className="muted">Not a reply to a message sent from here</span>
          )}
        </DetailRow>
        <DetailRow label="Message-ID">
          <code className="break-anywhere">{email.message_id || '—'}</code>
        </DetailRow>
        {email.size !== undefined ? <DetailRow label="Size">{formatSize(email.size)}</DetailRow> : null}
        <DetailRow label="Id">
          <code className="break-anywhere">{email.id}</code>
        </DetailRow>
      </dl>
    </section>
  );
}

export function Checks({ email }: { email: ReceivedEmail }) {
  const columns: Array<Column<CheckRow>> = [
    { header: 'Check', cell: (row) => row.check, className: 'nowrap' },
    { header: 'Result', cell: (row) => <Result result={row.result} />, className: 'nowrap' },
    {
      header: 'Domain',
      cell: (row) => (row.details ? <span className="break-anywhere">{row.details}</span> : '—'),
    },
  ];
  const verdict = email.spam?.verdict;
  const score = email.spam?.score;
  return (
    <section className="card" aria-labelledby="received-checks">
      <h2 id="received-checks">Sender authentication and spam</h2>
      <p className="muted">
        Whether the sending server was allowed to send for the domain (SPF), the message was signed by it (DKIM), the
        From domain&apos;s policy holds (DMARC), and forwarders vouched for it (ARC). A message can claim any sender:
        trust its From address only when DMARC passes.
      </p>
      <div className="stack-narrow">
        <DataTable
          caption="Sender authentication results"
          captionHidden
          columns={columns}
          rows={authenticationRows(email.authentication)}
          rowKey={(row) => row.key}
        />
      </div>
      <dl className="details">
        <DetailRow label="Spam verdict">
          {verdict === null || verdict === undefined ? (
            <span className="muted">Not scanned (no spam filter configured, or it could not be reached)</span>
          ) : (
            <>
              <StatusBadge tone={verdict === 'spam' ? 'failed' : 'verified'}>
                {verdict === 'spam' ? 'Spam' : 'Not spam'}
              </StatusBadge>
              {score !== null && score !== undefined ? ` score ${score}` : null}
            </>
          )}
        </DetailRow>
        <DetailRow label="Quarantined">
          {email.quarantined ? 'Yes: kept out of the received list and not announced to webhooks' : 'No'}
        </DetailRow>
      </dl>
    </section>
  );
}

function Outcome({ outcome, endpoints }: { outcome: RouteOutcome; endpoints: Webhook[] }) {
  if (outcome.action === 'forward') {
    if (outcome.skipped)
      return (
        <>
          not forwarded to {outcome.to}: {outcome.skipped}
        </>
      );
    return outcome.email_id ? (
      <>
        forwarded to {outcome.to} (<Link to={`/emails/${encodeURIComponent(outcome.email_id)}`}>the copy sent</Link>)
      </>
    ) : (
      <>forwarded to {outcome.to}</>
    );
  }
  const endpoint = endpoints.find((entry) => entry.id === outcome.endpoint_id)?.endpoint ?? outcome.endpoint_id;
  if (outcome.skipped)
    return (
      <>
        not sent to {endpoint}: {outcome.skipped}
      </>
    );
  return (
    <>
      sent to <Link to={`/webhooks/${encodeURIComponent(outcome.endpoint_id)}`}>{endpoint}</Link>
    </>
  );
}

export function Handling({ email }: { email: ReceivedEmail }) {
  const routes = email.routes ?? [];
  const usesWebhooks = routes.some((route) => route.actions.some((action) => action.type === 'webhook'));
  const webhooks = useApiGet<ListResponse<Webhook>>(usesWebhooks ? '/webhooks' : null);
  const endpoints = webhooks.data?.data ?? [];
  return (
    <section className="card" aria-labelledby="received-routes">
      <h2 id="received-routes">Routes applied</h2>
      {routes.length === 0 ? (
        <p className="muted">
          No <Link to="/inbound-routes">inbound route</Link> matched: it was stored, the default for a domain that
          receives mail.
        </p>
      ) : (
        <ol className="applied-routes">
          {routes.map((route, index) => (
            <li key={`${route.route_id}-${index}`}>
              <Link to={`/inbound-routes/${encodeURIComponent(route.route_id)}`}>
                Route <code>{route.route_id.slice(0, 8)}</code>
              </Link>
              :{' '}
              {route.actions.length
                ? route.actions.map((action) => actionText(action, endpoints)).join('; ')
                : 'no action'}
              {route.outcomes && route.outcomes.length > 0 ? (
                <ul>
                  {route.outcomes.map((outcome, at) => (
                    <li key={at}>
                      <Outcome outcome={outcome} endpoints={endpoints} />
                    </li>
                  ))}
                </ul>
              ) : null}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

export function Content({ email, base }: { email: ReceivedEmail; base: string }) {
  return (
    <section className="card" aria-labelledby="received-content">
      <h2 id="received-content">Content</h2>
      <h3>HTML</h3>
      {email.html === null ? <p className="muted">This message has no HTML part.</p> : null}
      <HtmlPreview
        previewPath={email.html !== null ? `${base}/preview` : null}
        title="The received message's HTML (sandboxed: no scripts run)"
      />
      <h3>Reply</h3>
      {email.stripped_text ? (
        <pre className="code-block message-text" tabIndex={0} aria-label="The reply without its quoted history">
          {email.stripped_text}
        </pre>
      ) : (
        <p className="muted">No text to show without its quoted history.</p>
      )}
      <h3>Text</h3>
      {email.text ? (
        <pre className="code-block message-text" tabIndex={0} aria-label="The message's text">
          {email.text}
        </pre>
      ) : (
        <p className="muted">This message has no text part.</p>
      )}
    </section>
  );
}

export function Attachments({ base, count }: { base: string; count: number }) {
  const attachments = useApiGet<ListResponse<ReceivedAttachment>>(count > 0 ? `${base}/attachments` : null);
  const rows = attachments.data?.data ?? [];
  const columns: Array<Column<ReceivedAttachment>> = [
    {
      header: 'Name',
      cell: (attachment) => {
        const name = attachment.filename || '(no name)';
        const url = webUrl(attachment.download_url);
        return url ? (
          <a href={url} download={attachment.filename ?? ''} rel="noreferrer" className="break-anywhere">
            {name}
          </a>
        ) : (
          <span className="break-anywhere">{name}</span>
        );
      },
    },
    { header: 'Size', cell: (attachment) => formatSize(attachment.size), className: 'numeric nowrap' },
    { header: 'Type', cell: (attachment) => attachment.content_type, className: 'hide-narrow' },
  ];
  return (
    <section className="card" aria-labelledby="received-attachments">
      <h2 id="received-attachments">Attachments</h2>
      {count === 0 ? <p className="muted">No attachments.</p> : null}
      <ErrorBanner error={attachments.error} title="The attachments could not be loaded" onRetry={attachments.reload} />
      {count > 0 && !attachments.data && attachments.loading ? <Loading label="Loading attachments…" /> : null}
      {rows.length > 0 ? (
        <>
          <DataTable
            caption="Attachments"
            captionHidden
            columns={columns}
            rows={rows}
            rowKey={(attachment) => attachment.id}
          />
          <p className="muted">Download links are signed and expire; reload the page for fresh ones.</p>
        </>
      ) : null}
    </section>
  );
}

export function Source({ email }: { email: ReceivedEmail }) {
  const raw = webUrl(email.raw?.download_url);
  const headers = Object.entries(email.headers ?? {});
  return (
    <section className="card" aria-labelledby="received-source">
      <h2 id="received-source">Source</h2>
      {raw ? (
        <p>
          <a href={raw} download={`${email.id}.eml`} rel="noreferrer">
            Download the raw message (.eml)
          </a>{' '}
          <span className="muted">
            (the link works until <Timestamp value={email.raw!.expires_at} />)
          </span>
        </p>
      ) : (
        <p className="muted">The raw message is no longer kept.</p>
      )}
      {headers.length > 0 ? (
        <details className="received-headers">
          <summary>Headers ({headers.length})</summary>
          <dl className="details">
            {headers.map(([name, value]) => (
              <DetailRow key={name} label={name}>
                <span className="break-anywhere">{value}</span>
              </DetailRow>
            ))}
          </dl>
        </details>
      ) : null}
    </section>
  );
}
