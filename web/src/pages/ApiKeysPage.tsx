import { useState, type FormEvent } from 'react';
import { api, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  Loading,
  PageHeader,
  RelativeTime,
  SecretOnce,
  SelectField,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import type { PageProps } from '../router.tsx';

type Permission = 'full_access' | 'sending_access';

interface ApiKey {
  id: string;
  name: string;
  permission: Permission;
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

export function ApiKeysPage(_props: PageProps) {
  const keys = useApiGet<ListResponse<ApiKey>>('/api-keys');
  const [name, setName] = useState('');
  const [permission, setPermission] = useState<Permission>('sending_access');
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const create = useAction((body: { name: string; permission: Permission }) =>
    api.post<{ id: string; token: string }>('/api-keys', body),
  );

  async function submit(event: FormEvent) {
    event.preventDefault();
    const result = await create.run({ name: name.trim(), permission });
    if (result) {
      setCreated({ name: name.trim(), token: result.token });
      setName('');
      keys.reload();
    }
  }

  const list = keys.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="API keys"
        description="The keys your applications use to send and manage email through the API and SMTP."
      />
      {created ? (
        <SecretOnce label={`API key “${created.name}”`} secret={created.token} onDone={() => setCreated(null)} />
      ) : null}
      <form className="card" onSubmit={submit} aria-labelledby="create-key-title" noValidate>
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
        <ErrorBanner error={create.error} exceptFields={['name', 'permission']} />
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
