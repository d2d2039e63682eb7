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
import { ReceivingSection, RecordWarnings } from './ReceivingSection.tsx';
import { HealthSection } from './HealthSection.tsx';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { DomainStatus, dnsRecords, domainState, type Domain, type DomainRecord } from './DomainsPage.tsx';

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
  if (domain.verification === 'trusted') {
    parts.push(`${domain.name} is trusted without DNS checks: it can send, but its DKIM record was not found.`);
  } else if (domain.status === 'verified') {
    parts.push(`${domain.name} is verified: you can send from any address at it.`);
  } else {
    parts.push(`${domain.name} is not verified yet: its DKIM record was not found.`);
  }
  if (missing.length > 0) parts.push(`Still missing: ${list(missing)}.`);
  if (unanswered.length > 0) parts.push(`DNS did not answer for ${list(unanswered)}: try again in a while.`);
  if (missing.length === 0 && unanswered.length === 0 && domain.status === 'verified') {
    parts.push('Every record was found.');
  } else if (domain.status !== 'verified' || domain.verification === 'trusted') {
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

// Reserved names (RFC 2606, RFC 6761) and private ones: no DNS provider publishes records for them.
const UNPUBLISHABLE = /\.(test|example|invalid|localhost|local|internal)$/;

/**
 * A domain trusted on the operator's word: it sends, signed with its DKIM key, but nothing has found its
 * records in DNS, which is what the Deliverability check reports too.
 */
function TrustedNotice({ domain }: { domain: Domain }) {
  return (
    <section className="card trusted-notice" aria-labelledby="trusted-title">
      <h2 id="trusted-title">Trusted without DNS checks</h2>
      <p>
        {domain.name} was marked verified by an operator (<code>mailroom domain verify --trust</code>) without looking
        at DNS, so Mailroom sends from it. Its mail is signed with the DKIM key of the record below, but that record has
        not been found in DNS: until it is, receivers cannot check the signature, and the Deliverability check below
        reports it missing.
      </p>
      <p>
        {UNPUBLISHABLE.test(domain.name)
          ? `${domain.name} is a reserved name that no DNS provider publishes: use it to try Mailroom out, and add a domain of your own to send to real inboxes.`
          : 'To verify it for real, publish the records below at your DNS provider, then press Verify DNS records.'}
      </p>
    </section>
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
                <DomainStatus status={domainState(data)} /> · added <Timestamp value={data.created_at} />
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
          {data.verification === 'trusted' ? <TrustedNotice domain={data} /> : null}
          <section aria-labelledby="records-title">
            <h2 id="records-title">DNS records to publish</h2>
            <p className="muted">
              Publish each record, of the type shown, at your DNS provider, then press Verify. DKIM is required to send;
              the others help your mail reach inboxes (and bring bounces back, or carry tracking links under your name).
            </p>
            {/* At phone width each record is a block of labelled values, its long name and value wrapped
                under each other (styles.css, .stack-narrow), instead of a table wider than the screen. On a
                wide screen the record's kind wraps above "(recommended)", so that Status stays in view. */}
            <div className="stack-narrow">
              <DataTable
                caption={`DNS records for ${data.name}`}
                captionHidden
                rows={dnsRecords(data)}
                rowKey={recordKey}
                columns={[
                  { header: 'Record', cell: (record) => <RecordName record={record} /> },
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
                        <RecordWarnings domain={data} record={record} />
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
