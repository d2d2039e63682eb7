import { CopyButton, DataTable, ErrorBanner, type Column } from '../components/index.ts';
import { useApiGet } from '../hooks.ts';

// A sending domain's DMARC aggregate reports (GET /domains/:id/dmarc): how much of its mail passed
// DMARC over the last 30 days as the mailbox providers saw it, and the source addresses that failed,
// which are either someone spoofing the domain or a sender of the organization's own that is not yet
// signed (a CRM, a help desk). Without reports, it says how to get them.

interface DmarcSource {
  source_ip: string;
  messages: number;
  passed: number;
  failed: number;
  dkim_aligned: number;
  spf_aligned: number;
  mailroom_source: string | null;
  reporters: string[];
  envelope_from: string[];
  dkim_domains: string[];
}

interface DmarcSummary {
  domain: string;
  days: number;
  reports: number;
  messages: number;
  passed: number;
  pass_rate: number | null;
  sources: DmarcSource[];
  rua: string | null;
}

const number = new Intl.NumberFormat();
const percent = new Intl.NumberFormat(undefined, { style: 'percent', maximumFractionDigits: 1 });

const COLUMNS: Array<Column<DmarcSource>> = [
  {
    header: 'Source',
    cell: (s) => (
      <>
        <code>{s.source_ip}</code>
        <span className="cell-note">
          {s.mailroom_source ? `Mailroom source ${s.mailroom_source}` : s.failed > 0 ? 'Not Mailroom' : null}
        </span>
      </>
    ),
  },
  { header: 'Messages', className: 'numeric', cell: (s) => number.format(s.messages) },
  {
    header: 'Failed DMARC',
    className: 'numeric',
    cell: (s) => (s.failed > 0 ? <strong>{number.format(s.failed)}</strong> : '0'),
  },
  {
    header: 'Aligned',
    cell: (s) => (
      <span className="nowrap">
        DKIM {number.format(s.dkim_aligned)} · SPF {number.format(s.spf_aligned)}
      </span>
    ),
  },
  {
    header: 'Sent as',
    cell: (s) => (
      <>
        {s.envelope_from.length > 0 ? (
          <span className="break-anywhere">return path {s.envelope_from.join(', ')}</span>
        ) : null}
        {s.dkim_domains.length > 0 ? (
          <span className="cell-note break-anywhere">signed by {s.dkim_domains.join(', ')}</span>
        ) : null}
        <span className="cell-note">reported by {s.reporters.join(', ')}</span>
      </>
    ),
  },
];

export function DmarcSection({ domainId, domainName }: { domainId: string; domainName: string }) {
  const summary = useApiGet<DmarcSummary>(`/domains/${encodeURIComponent(domainId)}/dmarc`);
  const data = summary.data;
  const record = data?.rua ? `v=DMARC1; p=none; rua=${data.rua}` : null;
  return (
    <section className="card" aria-labelledby="dmarc-title">
      <h2 id="dmarc-title">DMARC reports</h2>
      <ErrorBanner error={summary.error} title="The DMARC reports could not be loaded" onRetry={summary.reload} />
      {data && data.messages > 0 ? (
        <>
          <p>
            <strong>{percent.format(data.pass_rate ?? 0)}</strong> of {number.format(data.messages)} messages from{' '}
            {data.domain} passed DMARC in the last {data.days} days ({number.format(data.reports)}{' '}
            {data.reports === 1 ? 'report' : 'reports'}).{' '}
            {data.sources.some((s) => s.failed > 0)
              ? 'The sources that failed come first: an address you do not know is someone sending as your domain; one of your own services (a CRM, a help desk) needs DKIM for this domain or a place in its SPF record.'
              : 'No source failed.'}
          </p>
          <DataTable
            caption="DMARC results per source address"
            captionHidden
            columns={COLUMNS}
            rows={data.sources}
            rowKey={(s) => s.source_ip}
          />
        </>
      ) : data ? (
        <p className="muted">
          No reports about {domainName} in the last {data.days} days. Mailbox providers send them daily to the address
          in the domain&apos;s DMARC record.
        </p>
      ) : null}
      {record ? (
        <div className="dmarc-rua">
          <p className="muted">
            To receive them here, publish at <code>_dmarc.{domainName}</code> (keep your own <code>p=</code> if you have
            one):
          </p>
          <div className="dns-cell">
            <code className="dns-value">{record}</code>
            <CopyButton value={record} label="Copy DMARC record" />
          </div>
        </div>
      ) : null}
    </section>
  );
}
