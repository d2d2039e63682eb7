import { fieldError } from '../api.ts';
import { CheckboxField, CopyButton, ErrorBanner } from '../components/index.ts';
import { Link } from '../router.tsx';
import { DomainStatus, dnsRecords, recordWarnings, type Domain, type DomainRecord } from './DomainsPage.tsx';

/** Warnings about a record's value, next to it; the words say it is a warning, not only the colour. */
export function RecordWarnings({ domain, record }: { domain: Domain; record: DomainRecord }) {
  const warnings = recordWarnings(domain, record);
  if (warnings.length === 0) return null;
  return (
    <>
      {warnings.map((message) => (
        <p key={message} className="record-warning">
          <strong>Warning:</strong> {message}
        </p>
      ))}
    </>
  );
}

/**
 * Receiving mail at the domain: the switch (capabilities.receiving), the MX record that brings its mail to
 * Mailroom with that record's status (the same row as in the DNS table, repeated here because it is the
 * one step left after switching on), and reply tracking when the server has it.
 */
export function ReceivingSection({
  domain,
  busy,
  error,
  onChange,
}: {
  domain: Domain;
  busy: boolean;
  error: unknown;
  onChange: (changes: { capabilities?: { receiving: 'enabled' | 'disabled' }; reply_tracking?: boolean }) => void;
}) {
  const enabled = domain.capabilities?.receiving === 'enabled';
  const mx = dnsRecords(domain).find((record) => record.record === 'Receiving');
  return (
    <section className="card" aria-labelledby="receiving-title">
      <h2 id="receiving-title">Receiving</h2>
      <p className="muted">
        Mailroom can take the mail sent to addresses at {domain.name}: it is stored and shows under{' '}
        <Link to="/received">Received</Link>, and <Link to="/inbound-routes">inbound routes</Link> can forward it, send
        it to a webhook endpoint or reject it.
      </p>
      <CheckboxField
        label={`Receive mail at ${domain.name}`}
        checked={enabled}
        disabled={busy}
        onChange={(checked) => onChange({ capabilities: { receiving: checked ? 'enabled' : 'disabled' } })}
        error={fieldError(error, 'capabilities')}
      />
      {enabled && mx ? (
        <div className="receiving-mx">
          <p>
            Publish this MX record so that mail for {domain.name} reaches Mailroom. It replaces the MX records of any
            mailbox provider the domain uses now: mail to its addresses then comes here instead.
          </p>
          <dl className="details" aria-label="The MX record to publish">
            <div className="detail-row">
              <dt>Type</dt>
              <dd>
                MX <span className="muted">(priority {mx.priority ?? 10})</span>
              </dd>
            </div>
            <div className="detail-row">
              <dt>Name</dt>
              <dd>
                <code className="dns-value">{mx.name}</code>
              </dd>
            </div>
            <div className="detail-row">
              <dt>Value</dt>
              <dd className="dns-cell">
                <code className="dns-value">{mx.value}</code>
                <CopyButton value={mx.value} label="Copy the receiving MX value" />
                <RecordWarnings domain={domain} record={mx} />
              </dd>
            </div>
            <div className="detail-row">
              <dt>Status</dt>
              <dd>
                <DomainStatus status={mx.status} />
              </dd>
            </div>
          </dl>
        </div>
      ) : null}
      {domain.reply_tracking !== undefined ? (
        <CheckboxField
          label="Track replies (messages from this domain carry a reply address, so replies come back tied to them)"
          checked={domain.reply_tracking}
          disabled={busy}
          onChange={(checked) => onChange({ reply_tracking: checked })}
          error={fieldError(error, 'reply_tracking')}
        />
      ) : null}
      <ErrorBanner
        error={error}
        title="Receiving could not be changed"
        exceptFields={['capabilities', 'reply_tracking']}
      />
    </section>
  );
}
