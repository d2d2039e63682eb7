import { useEffect, useState } from 'react';
import { api, segment } from '../api.ts';
import { Button, ErrorBanner, RelativeTime, StatusBadge } from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';

// The deliverability doctor on a domain's page (GET /domains/:id/health, POST /domains/:id/check): what
// Gmail, Yahoo and Microsoft check of a sender, each finding with the fix to make, the failing ones first.
// Mailroom checks every verified domain once a day; Check now runs it at once.

interface Finding {
  check: string;
  subject: string;
  status: 'pass' | 'warn' | 'fail';
  summary: string;
  fix: string | null;
}

interface Health {
  status: 'pass' | 'warn' | 'fail' | null;
  checked_at: string | null;
  findings: Finding[];
}

const TONE = { pass: 'verified', warn: 'pending', fail: 'failed' } as const;
const WORD = { pass: 'Passes', warn: 'Warning', fail: 'Fails' } as const;
const ORDER = { fail: 0, warn: 1, pass: 2 } as const;

export function HealthSection({ domainId }: { domainId: string }) {
  const stored = useApiGet<Health>(`/domains/${segment(domainId)}/health`);
  const [health, setHealth] = useState<Health | undefined>(undefined);
  useEffect(() => setHealth(stored.data), [stored.data]);
  const check = useAction(() => api.post<Health>(`/domains/${segment(domainId)}/check`));
  const findings = [...(health?.findings ?? [])].sort((a, b) => ORDER[a.status] - ORDER[b.status]);
  const failing = findings.filter((f) => f.status !== 'pass').length;
  return (
    <section className="card" aria-labelledby="health-title">
      <h2 id="health-title">Deliverability</h2>
      <p className="muted">
        What Gmail, Yahoo and Microsoft check before they accept bulk mail: DKIM, SPF and DMARC, each sending
        address&apos;s PTR and blocklists, where bounces come back, complaints and one-click unsubscribe.
      </p>
      {health?.checked_at ? (
        <p>
          <StatusBadge tone={TONE[health.status ?? 'pass']}>{WORD[health.status ?? 'pass']}</StatusBadge>{' '}
          {failing === 0 ? 'Nothing to fix.' : `${failing} ${failing === 1 ? 'finding needs' : 'findings need'} a fix.`}{' '}
          <span className="muted">
            Checked <RelativeTime value={health.checked_at} />.
          </span>
        </p>
      ) : health ? (
        <p className="muted">Not checked yet.</p>
      ) : null}
      <div className="button-row">
        <Button
          busy={check.busy}
          busyLabel="Checking…"
          onClick={async () => {
            const result = await check.run();
            if (result) setHealth(result);
          }}
        >
          Check now
        </Button>
      </div>
      <ErrorBanner error={check.error ?? stored.error} title="The check could not be run" />
      {findings.length > 0 ? (
        <ul className="health-findings">
          {findings.map((finding) => (
            <li key={`${finding.check} ${finding.subject}`} className="health-finding">
              <StatusBadge tone={TONE[finding.status]}>{WORD[finding.status]}</StatusBadge>{' '}
              <strong>{finding.check.replace(/_/g, ' ')}</strong> ·{' '}
              <span className="break-anywhere">{finding.subject}</span>
              <p className="break-anywhere">{finding.summary}</p>
              {finding.fix ? <p className="health-fix break-anywhere">Fix: {finding.fix}</p> : null}
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}
