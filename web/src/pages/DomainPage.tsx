import { useState } from 'react';
import type { FormEvent } from 'react';
import { api, fieldError, segment } from '../api.ts';
import {
  Button,
  CheckboxField,
  ConfirmButton,
  CopyButton,
  DataTable,
  ErrorBanner,
  Field,
  Loading,
  PageHeader,
  Timestamp,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { DmarcSection } from './DmarcSection.tsx';
import { HealthSection } from './HealthSection.tsx';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { DomainStatus, dnsRecords, type Domain, type DomainRecord } from './DomainsPage.tsx';

const list = (names: string[]) => names.join(', ');

/** What a verification found, in words: verified or not, and which records are still missing. */
export function verificationSummary(domain: Domain): string {
  const missing = dnsRecords(domain)
    .filter((record) => record.status === 'failed')
    .map((record) => record.record);
  const unanswered = dnsRecords(domain)
    .filter((record) => record.status === 'pending')
    .map((record) => record.record);
  const parts: string[] = [];
  if (domain.status === 'verified') {
    parts.push(`${domain.name} is verified: you can send from any address at it.`);
  } else {
    parts.push(`${domain.name} is not verified yet: its DKIM record was not found.`);
  }
  if (missing.length > 0) parts.push(`Still missing: ${list(missing)}.`);
  if (unanswered.length > 0) parts.push(`DNS did not answer for ${list(unanswered)}: try again in a while.`);
  if (missing.length === 0 && unanswered.length === 0 && domain.status === 'verified') {
    parts.push('Every record was found.');
  } else if (domain.status !== 'verified') {
    parts.push('DNS changes can take a while to reach everyone: publish the records below, then verify again.');
  }
  return parts.join(' ');
}

/** A record told apart from the others: a return path has two SPF records, its MX and its TXT. */
const recordKey = (record: DomainRecord) => `${record.record} ${record.type} ${record.name}`;

/** What its copy buttons say: "SPF" alone is ambiguous when there is an MX and a TXT for it. */
const recordLabel = (record: DomainRecord) => (record.type === 'MX' ? `${record.record} MX` : record.record);

function RecordName({ record }: { record: DomainRecord }) {
  return (
    <>
      {record.record} <span className="muted">{record.required ? '(required)' : '(recommended)'}</span>
    </>
  );
}

export function DomainPage({ params }: PageProps) {
  const id = params.id ?? '';
  const domain = useApiGet<Domain>(`/domains/${segment(id)}`);
  const [summary, setSummary] = useState<string | null>(null);
  const verify = useAction(() => api.post<Domain>(`/domains/${segment(id)}/verify`));
  const tracking = useAction(
    (changes: {
      open_tracking?: boolean | null;
      click_tracking?: boolean | null;
      tracking_subdomain?: string | null;
    }) => api.patch(`/domains/${segment(id)}`, changes),
  );
  const tls = useAction((mode: Domain['tls']) => api.patch(`/domains/${segment(id)}`, { tls: mode }));
  const receiving = useAction(
    (changes: { capabilities?: { receiving: 'enabled' | 'disabled' }; reply_tracking?: boolean }) =>
      api.patch(`/domains/${segment(id)}`, changes),
  );
  // The tracking subdomain as being edited; null until the person types, so it shows the saved one.
  const [subdomain, setSubdomain] = useState<string | null>(null);

  async function runVerify() {
    setSummary(null);
    const result = await verify.run();
    if (result) {
      setSummary(verificationSummary(result));
      domain.reload();
    }
  }

  async function changeTracking(changes: {
    open_tracking?: boolean | null;
    click_tracking?: boolean | null;
    tracking_subdomain?: string | null;
  }) {
    if ((await tracking.run(changes)) !== undefined) {
      setSubdomain(null);
      domain.reload();
    }
  }

  async function changeTls(mode: Domain['tls']) {
    if ((await tls.run(mode)) !== undefined) domain.reload();
  }

  async function changeReceiving(changes: {
    capabilities?: { receiving: 'enabled' | 'disabled' };
    reply_tracking?: boolean;
  }) {
    if ((await receiving.run(changes)) !== undefined) domain.reload();
  }

  async function saveSubdomain(event: FormEvent) {
    event.preventDefault();
    const label = (subdomain ?? data?.tracking_subdomain ?? '').trim();
    await changeTracking({ tracking_subdomain: label === '' ? null : label });
  }

  const data = domain.data;
  return (
    <>
      <PageHeader
        title={data ? data.name : 'Domain'}
        description={
          <>
            <Link to="/domains">All domains</Link>
            {data ? (
              <>
                {' · '}
                <DomainStatus status={data.status} /> · added <Timestamp value={data.created_at} />
              </>
            ) : null}
          </>
        }
        actions={
          data ? (
            <Button variant="primary" busy={verify.busy} busyLabel="Checking DNS…" onClick={runVerify}>
              Verify DNS records
            </Button>
          ) : null
        }
      />
      <ErrorBanner error={domain.error} title="The domain could not be loaded" onRetry={domain.reload} />
      {domain.loading && !data ? <Loading label="Loading the domain…" /> : null}
      <ErrorBanner error={verify.error} title="The records could not be checked" />
      <p role="status" className={summary ? 'verify-result card' : 'visually-hidden'}>
        {verify.busy ? 'Checking DNS…' : (summary ?? '')}
      </p>

      {data ? (
        <>
          <section aria-labelledby="records-title">
            <h2 id="records-title">DNS records to publish</h2>
            <p className="muted">
              Publish each record, of the type shown, at your DNS provider, then press Verify. DKIM is required to send;
              the others help your mail reach inboxes (and bring bounces back, or carry tracking links under your name).
            </p>
            {/* At phone width each record is a block of labelled values, its long name and value wrapped
                under each other (styles.css, .stack-narrow), instead of a table wider than the screen. */}
            <div className="stack-narrow">
              <DataTable
                caption={`DNS records for ${data.name}`}
                captionHidden
                rows={dnsRecords(data)}
                rowKey={recordKey}
                columns={[
                  { header: 'Record', className: 'nowrap', cell: (record) => <RecordName record={record} /> },
                  {
                    header: 'Type',
                    cell: (record) =>
                      record.priority === undefined ? (
                        record.type
                      ) : (
                        <>
                          {record.type} <span className="muted">(priority {record.priority})</span>
                        </>
                      ),
                  },
                  {
                    header: 'Name',
                    cell: (record) => (
                      <div className="dns-cell">
                        <code className="dns-value">{record.name}</code>
                        <CopyButton value={record.name} label={`Copy ${recordLabel(record)} name`} />
                      </div>
                    ),
                  },
                  {
                    header: 'Value',
                    cell: (record) => (
                      <div className="dns-cell">
                        <code className="dns-value">{record.value}</code>
                        <CopyButton value={record.value} label={`Copy ${recordLabel(record)} value`} />
                      </div>
                    ),
                  },
                  { header: 'Status', cell: (record) => <DomainStatus status={record.status} /> },
                ]}
              />
            </div>
          </section>

          <section className="card" aria-labelledby="tracking-title">
            <h2 id="tracking-title">Tracking</h2>
            <p className="muted">
              The switches in force for messages from {data.name}. Changing one here overrides the organization&apos;s
              setting for this domain.
            </p>
            <CheckboxField
              label="Track opens (an invisible image in HTML messages)"
              checked={data.open_tracking}
              disabled={tracking.busy}
              onChange={(checked) => changeTracking({ open_tracking: checked })}
            />
            <CheckboxField
              label="Track clicks (links go through Mailroom)"
              checked={data.click_tracking}
              disabled={tracking.busy}
              onChange={(checked) => changeTracking({ click_tracking: checked })}
            />
            <div className="button-row">
              <Button
                busy={tracking.busy}
                busyLabel="Saving…"
                onClick={() => changeTracking({ open_tracking: null, click_tracking: null })}
              >
                Follow the organization&apos;s settings
              </Button>
            </div>
            <form className="inline-form" onSubmit={saveSubdomain} noValidate>
              <Field
                label="Tracking subdomain"
                hint={`One label, e.g. links for links.${data.name}: tracked links and the open image then use that name (publish its CNAME record above). Empty: Mailroom's own address.`}
                value={subdomain ?? data.tracking_subdomain ?? ''}
                onChange={(value) => (setSubdomain(value), tracking.clearError())}
                error={fieldError(tracking.error, 'tracking_subdomain')}
                autoComplete="off"
                spellCheck={false}
              />
              <Button type="submit" busy={tracking.busy} busyLabel="Saving…">
                Save tracking subdomain
              </Button>
            </form>
            <ErrorBanner
              error={tracking.error}
              title="Tracking could not be changed"
              exceptFields={['tracking_subdomain']}
            />
          </section>

          <section className="card" aria-labelledby="tls-title">
            <h2 id="tls-title">Encryption</h2>
            <p className="muted">
              Mail from {data.name} uses TLS whenever the receiving server offers it. Requiring it means a message is
              never sent in the clear: a server without TLS does not get it; it is retried, then fails.
            </p>
            <CheckboxField
              label="Require TLS (never send in the clear)"
              checked={data.tls === 'enforced'}
              disabled={tls.busy}
              onChange={(checked) => changeTls(checked ? 'enforced' : 'opportunistic')}
            />
            <ErrorBanner error={tls.error} title="The TLS setting could not be changed" />
          </section>

          <ReceivingSection
            domain={data}
            busy={receiving.busy}
            error={receiving.error}
            onChange={(changes) => void changeReceiving(changes)}
          />

          <HealthSection domainId={id} />

          <DmarcSection domainId={id} domainName={data.name} />

          <section className="card" aria-labelledby="delete-title">
            <h2 id="delete-title">Delete</h2>
            <p className="muted">Mail can no longer be sent from {data.name} once it is deleted.</p>
            <ConfirmButton
              question={`Delete ${data.name}? Sending from it stops at once; its DKIM key is lost.`}
              busyLabel="Deleting…"
              onConfirm={async () => {
                await api.delete(`/domains/${segment(id)}`);
                navigate('/domains');
              }}
            >
              Delete domain
            </ConfirmButton>
          </section>
        </>
      ) : null}
    </>
  );
}

/**
 * Receiving mail at the domain: the switch (capabilities.receiving), the MX record that brings its mail to
 * Mailroom with that record's status (the same row as in the DNS table, repeated here because it is the
 * one step left after switching on), and reply tracking when the server has it.
 */
function ReceivingSection({
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
