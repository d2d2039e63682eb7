import type { ReactNode } from 'react';
import type { ListResponse } from '../api.ts';
import {
  Button,
  DataTable,
  EmptyState,
  ErrorBanner,
  formatRelative,
  LearnMore,
  Loading,
  PageHeader,
  RelativeTime,
  StatusBadge,
  Timestamp,
  type Column,
} from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import type { Domain } from './DomainsPage.tsx';
import { SourcesSection } from './SourcesSection.tsx';
import { PROVIDERS, siteName } from './site-names.ts';

// The destination sites Mailroom delivers to (GET /destinations): the install's, shared by every
// organization, with the limits in force after back-off, the connections open, this organization's
// messages waiting for each, and holds. A hold of one of the organization's own sending domains (the
// site refused its SPF, DKIM or DMARC) is the one thing here the organization can fix, so it comes first.

interface SenderHold {
  sender_domain: string;
  paused_until: string;
  reply: string;
}

export interface Destination {
  object: 'destination';
  /** google, microsoft, yahoo, apple, relay, mx:<hosts>, or a domain without MX. */
  site: string;
  source: string;
  limits: {
    /** In force now: back-off lowers it below the configured one after throttling. */
    connection_limit: number;
    configured_connection_limit: number;
    max_deliveries_per_connection: number;
    /** Messages a minute in force; null: no limit. */
    max_message_rate: number | null;
    configured_max_message_rate: number | null;
    /** New connections a minute; null: no limit. */
    max_connection_rate: number | null;
  };
  connections: number;
  /** This organization's recipients waiting for the site. */
  queued: number;
  paused_until: string | null;
  pause_reason: 'throttled' | 'site_paused' | null;
  pause_reply: string | null;
  throttle_replies: number;
  last_reply: { code: number | null; text: string; at: string } | null;
  sender_holds: SenderHold[];
}

const number = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

const perMinute = (rate: number) => `${number.format(rate)} a minute`;

/** Back-off has lowered the site's limits below the configured ones. */
const lowered = (d: Destination) =>
  d.limits.connection_limit < d.limits.configured_connection_limit ||
  (d.limits.max_message_rate !== null &&
    d.limits.configured_max_message_rate !== null &&
    d.limits.max_message_rate < d.limits.configured_max_message_rate);

/** A reply with its code in front (the text usually starts with it already, as the server sent it). */
const replyWords = (code: number | null, text: string) =>
  code === null || text.startsWith(String(code)) ? text : `${code} ${text}`;

const PAUSE_REASONS: Record<string, string> = {
  throttled: 'The site asked Mailroom to slow down.',
  site_paused: 'The site is on hold.',
};

function SiteCell({ destination }: { destination: Destination }) {
  const { site } = destination;
  const kind = site.startsWith('mx:') ? (
    <span className="cell-note">MX hosts</span>
  ) : PROVIDERS[site] ? (
    <code className="cell-note">{site}</code>
  ) : (
    <span className="cell-note">a domain with no MX records</span>
  );
  return (
    <>
      <span className="break-anywhere">{siteName(site)}</span>
      {kind}
      {destination.source !== 'default' ? <span className="cell-note">source {destination.source}</span> : null}
    </>
  );
}

function StateCell({ destination }: { destination: Destination }) {
  const holds = destination.sender_holds.length;
  const held =
    holds > 0 ? (
      <span className="cell-note destination-held">
        {holds === 1 ? 'One of your domains is held here' : `${holds} of your domains are held here`}
      </span>
    ) : null;
  if (destination.paused_until) {
    return (
      <div className="destination-state">
        <StatusBadge tone="paused">Paused</StatusBadge>
        <span>
          until <Timestamp value={destination.paused_until} /> ({formatRelative(new Date(destination.paused_until))})
        </span>
        {destination.pause_reason ? (
          <span className="cell-note">{PAUSE_REASONS[destination.pause_reason] ?? destination.pause_reason}</span>
        ) : null}
        {destination.pause_reply ? (
          <span className="cell-note">
            Reply: <code className="destination-reply">{destination.pause_reply}</code>
          </span>
        ) : null}
        {held}
      </div>
    );
  }
  if (lowered(destination)) {
    return (
      <div className="destination-state">
        <StatusBadge tone="throttled">Throttled</StatusBadge>
        <span className="cell-note">Sending below its limits after the site asked to slow down.</span>
        {held}
      </div>
    );
  }
  return (
    <div className="destination-state">
      <StatusBadge tone="sending">Sending</StatusBadge>
      {held}
    </div>
  );
}

function ConnectionsCell({ destination: { connections, limits } }: { destination: Destination }) {
  return (
    <div className="destination-limits">
      <span className="nowrap">
        {number.format(connections)} of {number.format(limits.connection_limit)}
      </span>
      {limits.connection_limit < limits.configured_connection_limit ? (
        <span className="cell-note">lowered from {number.format(limits.configured_connection_limit)}</span>
      ) : null}
      <span className="cell-note">up to {number.format(limits.max_deliveries_per_connection)} messages each</span>
    </div>
  );
}

function RateCell({ destination: { limits } }: { destination: Destination }) {
  return (
    <div className="destination-limits">
      <span className="nowrap">
        {limits.max_message_rate === null ? 'No limit' : perMinute(limits.max_message_rate)}
      </span>
      {limits.configured_max_message_rate !== null &&
      limits.max_message_rate !== null &&
      limits.max_message_rate < limits.configured_max_message_rate ? (
        <span className="cell-note">lowered from {perMinute(limits.configured_max_message_rate)}</span>
      ) : null}
      {limits.max_connection_rate !== null ? (
        <span className="cell-note">new connections: {perMinute(limits.max_connection_rate)}</span>
      ) : null}
    </div>
  );
}

function LastReplyCell({ destination }: { destination: Destination }) {
  const reply = destination.last_reply;
  if (!reply) return <span className="muted">None</span>;
  // The reply that paused the site is shown with the pause already.
  const shownAbove = destination.paused_until !== null && destination.pause_reply === reply.text;
  return (
    <>
      {shownAbove ? (
        <span>The reply shown under State</span>
      ) : (
        <code className="destination-reply">{replyWords(reply.code, reply.text)}</code>
      )}
      <span className="cell-note">
        <RelativeTime value={reply.at} />
        {destination.throttle_replies > 0
          ? ` · ${number.format(destination.throttle_replies)} throttle ${destination.throttle_replies === 1 ? 'reply' : 'replies'} in all`
          : ''}
      </span>
    </>
  );
}

const COLUMNS: Array<Column<Destination>> = [
  { header: 'Site', cell: (d) => <SiteCell destination={d} /> },
  { header: 'State', cell: (d) => <StateCell destination={d} /> },
  { header: 'Connections', cell: (d) => <ConnectionsCell destination={d} /> },
  { header: 'Rate', cell: (d) => <RateCell destination={d} /> },
  { header: 'Queued', className: 'numeric', cell: (d) => number.format(d.queued) },
  { header: 'Last throttle reply', cell: (d) => <LastReplyCell destination={d} /> },
];

/** The organization's sending domains held at a site, each with what to do about it. */
function SenderHolds({ destinations, domains }: { destinations: Destination[]; domains: Domain[] | undefined }) {
  const holds = destinations.flatMap((d) => d.sender_holds.map((hold) => ({ ...hold, site: d.site })));
  if (holds.length === 0) return null;
  const domainIds = new Map((domains ?? []).map((domain) => [domain.name, domain.id]));
  const heldDomains = new Set(holds.map((hold) => hold.sender_domain)).size;
  return (
    <section className="sender-holds" aria-labelledby="sender-holds-title">
      <h2 id="sender-holds-title">
        {heldDomains === 1
          ? 'Mail from one of your domains is held'
          : `Mail from ${heldDomains} of your domains is held`}
      </h2>
      <p>
        The site refused the domain itself (SPF, DKIM or DMARC). Its mail there waits, nothing is lost: fix the
        domain&apos;s DNS records, then press Verify on its page.{' '}
        <LearnMore page="shaping" section="back-off-and-holds" about="holds" />
      </p>
      <ul className="sender-hold-list">
        {holds.map((hold) => {
          const id = domainIds.get(hold.sender_domain);
          return (
            <li key={`${hold.site} ${hold.sender_domain}`} className="sender-hold">
              <p className="sender-hold-head">
                <strong className="break-anywhere">{hold.sender_domain}</strong> at{' '}
                <strong className="break-anywhere">{siteName(hold.site)}</strong>, held until{' '}
                <Timestamp value={hold.paused_until} /> ({formatRelative(new Date(hold.paused_until))})
              </p>
              <p className="sender-hold-reply">
                The site said: <code className="destination-reply">{hold.reply}</code>
              </p>
              {id ? (
                <Link to={`/domains/${id}`}>Check the DNS records of {hold.sender_domain}</Link>
              ) : (
                <span className="muted">Look at {hold.sender_domain}&apos;s records on Domains.</span>
              )}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

export function DestinationsPage(_props: PageProps) {
  const list = useApiGet<{ object: 'list'; data: Destination[] }>('/destinations');
  const domains = useApiGet<ListResponse<Domain>>('/domains');
  const rows = list.data?.data ?? [];
  // Only the holds' links need the domains: a failure leaves those links out, said once here.
  const domainsError = domains.error ? (
    <ErrorBanner error={domains.error} title="The domains could not be loaded" onRetry={domains.reload} />
  ) : null;
  let content: ReactNode = null;
  if (list.data && rows.length === 0) {
    content = (
      <EmptyState
        title="No destinations yet"
        action={
          <Link className="button button-secondary" to="/">
            Send a test email from the Overview
          </Link>
        }
      >
        A mailbox provider or mail server appears here once Mailroom delivers to it (the capture transport meets none).{' '}
        <LearnMore page="shaping" section="seeing-and-steering-destinations" about="destinations" />
      </EmptyState>
    );
  } else if (rows.length > 0) {
    content = (
      // Busy until the domains are read too: a hold's link to its domain's records needs the domain's id.
      <div className="destinations-list" aria-busy={list.loading || domains.loading || undefined}>
        <SenderHolds destinations={rows} domains={domains.data?.data} />
        <DataTable
          caption="Destination sites"
          captionHidden
          columns={COLUMNS}
          rows={rows}
          rowKey={(d) => `${d.source} ${d.site}`}
        />
        <p className="muted">Limits are shared by everyone on this Mailroom; Queued counts your messages only.</p>
      </div>
    );
  }
  return (
    <>
      <PageHeader
        title="Destinations"
        description={
          <>
            The mail servers Mailroom delivers to, how fast it may send to each, and what holds your mail back.{' '}
            <LearnMore page="shaping" about="delivery shaping" />
          </>
        }
        actions={
          list.data ? (
            <Button busy={list.loading} busyLabel="Refreshing…" onClick={list.reload}>
              Refresh
            </Button>
          ) : null
        }
      />
      <ErrorBanner error={list.error} title="The destinations could not be loaded" onRetry={list.reload} />
      {!list.data && list.loading ? <Loading label="Loading destinations…" /> : null}
      {domainsError}
      {content}
      <SourcesSection />
    </>
  );
}
