import { useState, type FormEvent } from 'react';
import { api, fieldError, type ListResponse } from '../api.ts';
import {
  Button,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  JumpToForm,
  LearnMore,
  Loading,
  PageHeader,
  RelativeTime,
  StatusBadge,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';

export type RecordStatus = 'not_started' | 'pending' | 'verified' | 'failed';

export interface DomainRecord {
  record: 'DKIM' | 'SPF' | 'DMARC' | 'Tracking' | 'Receiving';
  name: string;
  /** TXT, MX (a custom return path's, or the Receiving one at the domain's name) or CNAME (a tracking subdomain's). */
  type: string;
  ttl: string;
  status: RecordStatus;
  value: string;
  /** MX records only. */
  priority?: number;
  required: boolean;
}

/** A record value that cannot work as it is (a host that is not a public name), with the setting to change. */
export interface DomainWarning {
  /** Where: `records[1].value`, `additional_records[0].value`. */
  field: string;
  message: string;
}

export interface Domain {
  id: string;
  name: string;
  status: 'pending' | 'verified';
  /** How a verified domain was verified: its DKIM record found ('dns'), or on the operator's word ('trusted'). */
  verification?: 'dns' | 'trusted' | null;
  created_at: string;
  open_tracking: boolean;
  click_tracking: boolean;
  /** 'enforced': the domain's mail is never sent in the clear. */
  tls: 'opportunistic' | 'enforced';
  /** Resend's region, as given when the domain was added; Mailroom sends from its own servers whatever it says. */
  region: string;
  /** The label tracking links use under the domain's name; absent when they use Mailroom's own address. */
  tracking_subdomain?: string;
  /** Resend's: sending is always on; receiving is the domain's switch (the inbound listener takes its mail). */
  capabilities?: { sending: 'enabled' | 'disabled'; receiving: 'enabled' | 'disabled' };
  /** Sent messages carry a signed reply address as Reply-To, so replies come back tied to them. */
  reply_tracking?: boolean;
  /** Resend's record kinds (DKIM, SPF, Tracking, Receiving); additional_records holds the others (DMARC). */
  records: DomainRecord[];
  additional_records: DomainRecord[];
  warnings?: DomainWarning[];
}

/** Every record a domain's owner publishes, in the order they are shown. */
export const dnsRecords = (domain: Domain) => [...domain.records, ...domain.additional_records];

/** The messages of the warnings about one record (matched by its place in records or additional_records). */
export function recordWarnings(domain: Domain, record: DomainRecord): string[] {
  const list = domain.records.includes(record) ? 'records' : 'additional_records';
  const field = `${list}[${domain[list].indexOf(record)}].value`;
  return (domain.warnings ?? []).filter((warning) => warning.field === field).map((warning) => warning.message);
}

/** A domain's state to show: a verified domain trusted without DNS checks is told apart from one found in DNS. */
export const domainState = (domain: Domain) => (domain.verification === 'trusted' ? 'trusted' : domain.status);

/** A domain's or record's status in words, with a class for its colour. */
export function DomainStatus({ status }: { status: string }) {
  const words: Record<string, string> = {
    verified: 'Verified',
    trusted: 'Trusted without DNS checks',
    pending: 'Pending',
    failed: 'Not found',
    not_started: 'Not checked',
  };
  return <StatusBadge tone={status}>{words[status] ?? status}</StatusBadge>;
}

export function DomainsPage(_props: PageProps) {
  const domains = useApiGet<ListResponse<Domain>>('/domains');
  const [name, setName] = useState('');
  const add = useAction((domainName: string) => api.post<Domain>('/domains', { name: domainName }));

  async function submit(event: FormEvent) {
    event.preventDefault();
    const created = await add.run(name.trim());
    if (created) navigate(`/domains/${created.id}`);
  }

  const list = domains.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="Domains"
        description={
          <>
            The domains you send from, the DNS records each needs, and whether they are verified.{' '}
            <LearnMore page="domains" about="sending domains" />
          </>
        }
        actions={<JumpToForm formId="add-domain">New domain</JumpToForm>}
      />
      <form
        id="add-domain"
        className="card inline-form"
        onSubmit={submit}
        aria-labelledby="add-domain-title"
        noValidate
      >
        <h2 id="add-domain-title">Add a domain</h2>
        <Field
          label="Domain name"
          hint="The part after @ in the addresses you send from, e.g. example.com."
          value={name}
          onChange={(value) => (setName(value), add.clearError())}
          error={fieldError(add.error, 'name')}
          autoComplete="off"
          spellCheck={false}
        />
        <ErrorBanner error={add.error} exceptFields={['name']} />
        <Button type="submit" variant="primary" busy={add.busy} busyLabel="Adding…">
          Add domain
        </Button>
      </form>

      <ErrorBanner error={domains.error} title="The domains could not be loaded" onRetry={domains.reload} />
      {domains.loading && !domains.data ? <Loading label="Loading domains…" /> : null}
      {domains.data && list.length === 0 ? (
        <EmptyState title="No domains yet">
          Add the domain you send from above. Mailroom then shows the DNS records to publish, and once its DKIM record
          is found you can send from any address at it.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Your domains"
          rows={list}
          rowKey={(domain) => domain.id}
          columns={[
            { header: 'Domain', cell: (domain) => <Link to={`/domains/${domain.id}`}>{domain.name}</Link> },
            { header: 'Status', cell: (domain) => <DomainStatus status={domainState(domain)} /> },
            {
              header: 'Records found',
              className: 'hide-narrow',
              cell: (domain) =>
                dnsRecords(domain).every((record) => record.status === 'not_started')
                  ? 'Not checked yet'
                  : `${dnsRecords(domain).filter((record) => record.status === 'verified').length} of ${dnsRecords(domain).length}`,
            },
            { header: 'Added', className: 'nowrap', cell: (domain) => <RelativeTime value={domain.created_at} /> },
          ]}
        />
      ) : null}
    </>
  );
}
