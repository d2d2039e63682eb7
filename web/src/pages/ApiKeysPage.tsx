import { useState, type FormEvent } from 'react';
import { api, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  JumpToForm,
  LearnMore,
  Loading,
  PageHeader,
  RelativeTime,
  SecretOnce,
  SelectField,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import type { PageProps } from '../router.tsx';
import type { Domain } from './DomainsPage.tsx';

type Permission = 'full_access' | 'sending_access';

interface ApiKey {
  id: string;
  name: string;
  permission: Permission;
  /** A sending key limited to one domain sends only from it; null: any of the organization's domains. */
  domain_id: string | null;
  created_at: string;
  /** Up to a minute behind: the server writes a key's use at most once a minute. */
  last_used_at: string | null;
}

const PERMISSIONS: Array<{ value: Permission; label: string }> = [
  { value: 'sending_access', label: 'Sending access: send email only' },
  { value: 'full_access', label: 'Full access: send and manage everything' },
];

const permissionWords = (permission: Permission) =>
  permission === 'full_access' ? 'Full access' : permission === 'sending_access' ? 'Sending access' : permission;

const ALL_DOMAINS = '';

export function ApiKeysPage(_props: PageProps) {
  const keys = useApiGet<ListResponse<ApiKey>>('/api-keys');
  const domains = useApiGet<ListResponse<Domain>>('/domains');
  const [name, setName] = useState('');
  const [permission, setPermission] = useState<Permission>('sending_access');
  const [domainId, setDomainId] = useState(ALL_DOMAINS);
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const create = useAction((body: { name: string; permission: Permission; domain_id?: string }) =>
    api.post<{ id: string; token: string }>('/api-keys', body),
  );

  async function submit(event: FormEvent) {
    event.preventDefault();
    // Only a sending key can be limited to a domain (the API refuses domain_id with full access).
    const limit = permission === 'sending_access' && domainId !== ALL_DOMAINS ? { domain_id: domainId } : {};
    const result = await create.run({ name: name.trim(), permission, ...limit });
    if (result) {
      setCreated({ name: name.trim(), token: result.token });
      setName('');
      setDomainId(ALL_DOMAINS);
      keys.reload();
    }
  }

  const domainList = domains.data?.data ?? [];
  /** What a key may send from, in words; a key whose domain was deleted sends nothing. */
  const domainWords = (key: ApiKey) => {
    if (key.domain_id === null) return 'All domains';
    const domain = domainList.find((d) => d.id === key.domain_id);
    if (domain) return domain.name;
    return domains.data ? 'Deleted domain: sends nothing' : key.domain_id;
  };

  const list = keys.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="API keys"
        description={
          <>
            The keys your applications use to send and manage email through the API and SMTP.{' '}
            <LearnMore page="api" section="authentication" about="API keys" />
          </>
        }
        actions={<JumpToForm formId="create-key">New API key</JumpToForm>}
      />
      {created ? (
        <SecretOnce label={`API key “${created.name}”`} secret={created.token} onDone={() => setCreated(null)} />
      ) : null}
      <form id="create-key" className="card" onSubmit={submit} aria-labelledby="create-key-title" noValidate>
        <h2 id="create-key-title">Create a key</h2>
        <Field
          label="Name"
          hint="Says where the key is used, e.g. “Production web app”."
          value={name}
          maxLength={50}
          onChange={(value) => (setName(value), create.clearError())}
          error={fieldError(create.error, 'name')}
          autoComplete="off"
        />
        <SelectField
          label="Permission"
          hint="Full access can also manage domains, keys, templates, topics and contacts."
          value={permission}
          onChange={(value) => setPermission(value as Permission)}
          options={PERMISSIONS}
          error={fieldError(create.error, 'permission')}
        />
        {permission === 'sending_access' ? (
          <>
            <SelectField
              label="Sends from"
              hint="A key limited to one domain can send only with a From address at that domain."
              value={domainId}
              onChange={(value) => (setDomainId(value), create.clearError())}
              options={[
                { value: ALL_DOMAINS, label: 'All domains' },
                ...domainList.map((domain) => ({ value: domain.id, label: domain.name })),
              ]}
              error={fieldError(create.error, 'domain_id')}
            />
            <ErrorBanner error={domains.error} title="The domains could not be loaded" onRetry={domains.reload} />
          </>
        ) : null}
        <ErrorBanner error={create.error} exceptFields={['name', 'permission', 'domain_id']} />
        <Button type="submit" variant="primary" busy={create.busy} busyLabel="Creating…">
          Create key
        </Button>
      </form>

      <ErrorBanner error={keys.error} title="The keys could not be loaded" onRetry={keys.reload} />
      {keys.loading && !keys.data ? <Loading label="Loading keys…" /> : null}
      {keys.data && list.length === 0 ? (
        <EmptyState title="No API keys">
          Create one above for each application that sends through Mailroom; give it sending access unless it also
          manages domains, templates or contacts.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Active keys"
          rows={list}
          rowKey={(key) => key.id}
          columns={[
            { header: 'Name', cell: (key) => key.name },
            { header: 'Permission', cell: (key) => permissionWords(key.permission) },
            { header: 'Sends from', cell: domainWords },
            {
              header: 'Created',
              className: 'nowrap hide-narrow',
              cell: (key) => <RelativeTime value={key.created_at} />,
            },
            {
              header: 'Last used',
              className: 'nowrap',
              cell: (key) => (key.last_used_at ? <RelativeTime value={key.last_used_at} /> : 'Never'),
            },
            {
              header: 'Rename',
              cell: (key) => <RenameKey apiKey={key} onRenamed={keys.reload} />,
            },
            {
              header: 'Revoke',
              cell: (key) => (
                <ConfirmButton
                  question={`Revoke “${key.name}”? Requests with it are refused at once; this cannot be undone.`}
                  busyLabel="Revoking…"
                  onConfirm={async () => {
                    await api.delete(`/api-keys/${segment(key.id)}`);
                    keys.reload();
                  }}
                >
                  <span>
                    Revoke<span className="visually-hidden"> {key.name}</span>
                  </span>
                </ConfirmButton>
              ),
            },
          ]}
        />
      ) : null}
    </>
  );
}

/** A key's name changed in place (PATCH /api-keys/:id); the token stays the same. */
function RenameKey({ apiKey, onRenamed }: { apiKey: ApiKey; onRenamed: () => void }) {
  const [open, setOpen] = useState(false);
  const [name, setName] = useState(apiKey.name);
  const rename = useAction((body: { name: string }) => api.patch(`/api-keys/${segment(apiKey.id)}`, body));

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (await rename.run({ name: name.trim() })) {
      setOpen(false);
      onRenamed();
    }
  }

  if (!open) {
    return (
      <Button onClick={() => (setName(apiKey.name), rename.clearError(), setOpen(true))}>
        Rename<span className="visually-hidden"> {apiKey.name}</span>
      </Button>
    );
  }
  return (
    <form onSubmit={submit} aria-label={`Rename “${apiKey.name}”`} noValidate>
      <Field
        label="New name"
        value={name}
        maxLength={50}
        onChange={(value) => (setName(value), rename.clearError())}
        error={fieldError(rename.error, 'name')}
        autoComplete="off"
      />
      <ErrorBanner error={rename.error} exceptFields={['name']} />
      <Button type="submit" variant="primary" busy={rename.busy} busyLabel="Saving…">
        Save
      </Button>{' '}
      <Button onClick={() => setOpen(false)}>Cancel</Button>
    </form>
  );
}
