import { useState } from 'react';
import { api } from '../api.ts';
import { CheckboxField, CopyButton, ErrorBanner, Loading, PageHeader, Timestamp } from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import type { PageProps } from '../router.tsx';

// The organization (GET /organization) and the only settings it may change itself: open and click
// tracking (PATCH /organization). Quota and rate limit are the operator's (CLI), shown here only.

interface Organization {
  id: string;
  name: string;
  monthly_quota: number;
  rate_limit: number;
  open_tracking: boolean;
  click_tracking: boolean;
  created_at: string;
}

type Switch = 'open_tracking' | 'click_tracking';

const numberFormat = new Intl.NumberFormat();

export function SettingsPage(_props: PageProps) {
  const organization = useApiGet<Organization>('/organization');
  // What the server last said, updated by each save's answer.
  const [saved, setSaved] = useState<Organization | undefined>(undefined);
  const [result, setResult] = useState('');
  const current = saved ?? organization.data;
  const save = useAction((change: Partial<Record<Switch, boolean>>) =>
    api.patch<Organization>('/organization', change),
  );
  const [pending, setPending] = useState<Switch | undefined>(undefined);

  const toggle = async (name: Switch, value: boolean) => {
    setPending(name);
    setResult('');
    const answer = await save.run({ [name]: value });
    setPending(undefined);
    if (answer) {
      setSaved(answer);
      const what = name === 'open_tracking' ? 'Open tracking' : 'Click tracking';
      setResult(`Saved: ${what} is ${answer[name] ? 'on' : 'off'}.`);
    }
  };

  return (
    <>
      <PageHeader title="Settings" description="Your organization's name, sending limits and tracking." />
      <ErrorBanner error={organization.error} title="The settings could not be loaded" onRetry={organization.reload} />
      {!current && organization.loading ? <Loading label="Loading settings…" /> : null}
      {current ? (
        <>
          <section className="card" aria-labelledby="settings-organization">
            <h2 id="settings-organization">Organization</h2>
            <dl className="details">
              <div className="detail-row">
                <dt>Name</dt>
                <dd className="break-anywhere">{current.name}</dd>
              </div>
              <div className="detail-row">
                <dt>Id</dt>
                <dd className="id-with-copy">
                  <code className="break-anywhere">{current.id}</code>
                  <CopyButton value={current.id} label="Copy organization id" />
                </dd>
              </div>
              <div className="detail-row">
                <dt>Monthly quota</dt>
                <dd>{numberFormat.format(current.monthly_quota)} recipients</dd>
              </div>
              <div className="detail-row">
                <dt>Rate limit</dt>
                <dd>{numberFormat.format(current.rate_limit)} messages per second</dd>
              </div>
              <div className="detail-row">
                <dt>Created</dt>
                <dd>
                  <Timestamp value={current.created_at} />
                </dd>
              </div>
            </dl>
            <p className="muted">The quota and rate limit are set by whoever runs Mailroom (the operator CLI).</p>
          </section>
          <section className="card" aria-labelledby="settings-tracking">
            <h2 id="settings-tracking">Tracking</h2>
            <p className="muted">
              Applies to messages with HTML sent from now on. A domain with switches of its own (Domains page) uses
              those instead.
            </p>
            <CheckboxField
              label="Track opens"
              hint="Adds an invisible image to each copy and records opened when it loads."
              checked={current.open_tracking}
              disabled={save.busy}
              onChange={(value) => void toggle('open_tracking', value)}
            />
            <CheckboxField
              label="Track clicks"
              hint="Sends links through Mailroom and records clicked when one is followed."
              checked={current.click_tracking}
              disabled={save.busy}
              onChange={(value) => void toggle('click_tracking', value)}
            />
            {pending ? <Loading label="Saving…" /> : null}
            <ErrorBanner error={save.error} title="The change was not saved" />
            <p role="status" className="form-result">
              {result}
            </p>
          </section>
        </>
      ) : null}
    </>
  );
}
