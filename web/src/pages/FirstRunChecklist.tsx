import { useEffect, useState, type ReactNode } from 'react';
import { api, type ListResponse } from '../api.ts';
import { Button, CopyButton, ErrorBanner, SecretOnce } from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import { useSession } from '../session.ts';
import { SendTestEmail, useVerifiedDomains } from './SendTestEmail.tsx';

// The first-run checklist on the Overview: verify a domain, create an API key, send a first email, each
// ticked from the organization's real state (not from clicks on this page), with examples that use this
// server's address and the organization's own verified domain. It goes away once all three are done, or
// when dismissed (remembered in this browser, per user).

interface ConnectionSettings {
  api_url: string;
  smtp: { host: string; listeners: Array<{ port: number; security: 'starttls' | 'tls' }>; usernames: string[] };
}

/** What an example shows for a key it does not have: the dashboard never sees an existing key's token. */
export const KEY_PLACEHOLDER = 'mr_...';

const dismissedKey = (email: string) => `mailroom.first-run-dismissed:${email}`;

function readDismissed(email: string): boolean {
  try {
    return localStorage.getItem(dismissedKey(email)) === '1';
  } catch {
    return false; // storage disabled: the checklist shows until done
  }
}

export function FirstRunChecklist() {
  const session = useSession();
  const email = session?.email ?? '';
  const [dismissed, setDismissed] = useState(() => readDismissed(email));
  const domains = useVerifiedDomains();
  const keys = useApiGet<ListResponse<{ id: string }>>('/api-keys');
  const emails = useApiGet<ListResponse<{ id: string }>>('/emails', { limit: 1 });
  const settings = useApiGet<ConnectionSettings>('/connection-settings');
  const [newKey, setNewKey] = useState<string | null>(null);
  const [sentId, setSentId] = useState<string | null>(null);
  const createKey = useAction(() =>
    api.post<{ id: string; token: string }>('/api-keys', { name: 'First key', permission: 'sending_access' }),
  );

  const loaded = domains.data !== undefined && keys.data !== undefined && emails.data !== undefined;
  const hasDomain = domains.verified.length > 0;
  const hasKey = (keys.data?.data.length ?? 0) > 0;
  const hasSent = (emails.data?.data.length ?? 0) > 0;
  const allDone = hasDomain && hasKey && hasSent;
  // Finished while the page is open: it stays, saying so, until dismissed or left (the last step's result
  // links to the message sent); on the next visit it is gone.
  const [wasIncomplete, setWasIncomplete] = useState(false);
  useEffect(() => {
    if (loaded && !allDone) setWasIncomplete(true);
  }, [loaded, allDone]);

  if (dismissed) return null;
  if (!loaded) {
    // A step's state could not be read: say so rather than hide the checklist without a word.
    const failed = [domains, keys, emails].filter((loading) => loading.error !== undefined);
    if (failed.length === 0) return null;
    return (
      <ErrorBanner
        error={failed[0]!.error}
        title="The getting-started checklist could not be loaded"
        onRetry={() => failed.forEach((loading) => loading.reload())}
      />
    );
  }
  if (allDone && !wasIncomplete && newKey === null) return null;

  const pendingDomain = (domains.data?.data ?? []).find((domain) => domain.status !== 'verified');
  const dismiss = () => {
    try {
      localStorage.setItem(dismissedKey(email), '1');
    } catch {
      // not remembered: it shows again next time
    }
    setDismissed(true);
  };
  async function addKey() {
    const created = await createKey.run();
    if (created) {
      setNewKey(created.token);
      keys.reload();
    }
  }
  const done = [hasDomain, hasKey, hasSent].filter(Boolean).length;

  return (
    <section className="card first-run" aria-labelledby="first-run-title">
      <div className="first-run-header">
        <h2 id="first-run-title">Get started</h2>
        {/* Not while a new key is on screen: dismissing would throw away its only showing. */}
        <Button variant="quiet" onClick={dismiss} disabled={newKey !== null}>
          Dismiss
        </Button>
      </div>
      <p className="muted">
        {allDone
          ? 'All done: your organization is sending. This list will not show again.'
          : `${done} of 3 done. Each step is ticked as soon as Mailroom sees it done.`}
      </p>
      <ol className="checklist" aria-label="Steps to send your first email">
        <Step done={hasDomain} title="Verify a domain">
          {hasDomain ? (
            <>
              You can send from any address at <strong>{domains.verified[0]!.name}</strong>.
            </>
          ) : pendingDomain ? (
            <>
              Publish the DNS records of <Link to={`/domains/${pendingDomain.id}`}>{pendingDomain.name}</Link>, then
              press Verify.
            </>
          ) : (
            <>
              <Link to="/domains">Add the domain you send from</Link> and publish its DNS records.
            </>
          )}
        </Step>
        <Step done={hasKey} title="Create an API key">
          {newKey ? (
            <SecretOnce label="API key" secret={newKey} onDone={() => setNewKey(null)} />
          ) : hasKey ? (
            <>
              Your applications authenticate with a key: see <Link to="/api-keys">API keys</Link>.
            </>
          ) : (
            <>
              <Button variant="primary" busy={createKey.busy} busyLabel="Creating…" onClick={addKey}>
                Create a sending key
              </Button>{' '}
              <span className="muted">
                (sending access only; or choose a name and permission on <Link to="/api-keys">API keys</Link>)
              </span>
              <ErrorBanner error={createKey.error} title="The key could not be created" />
            </>
          )}
        </Step>
        <Step done={hasSent} title="Send your first email">
          {sentId ? (
            <p role="status">
              Test email sent. <Link to={`/emails/${encodeURIComponent(sentId)}`}>Follow it on its page</Link>: its
              timeline shows when it is delivered.
            </p>
          ) : hasSent ? (
            <>
              Your messages are on <Link to="/emails">Emails</Link>.
            </>
          ) : (
            <>
              <p>Send a test email from here, or from your code with one of the examples below.</p>
              <SendTestEmail
                onSent={(id) => {
                  setSentId(id);
                  emails.reload();
                }}
              />
            </>
          )}
        </Step>
      </ol>
      {settings.data ? (
        <Examples
          settings={settings.data}
          domain={domains.verified[0]?.name}
          apiKey={newKey ?? KEY_PLACEHOLDER}
          to={email || 'you@example.com'}
        />
      ) : null}
    </section>
  );
}

function Step({ done, title, children }: { done: boolean; title: string; children: ReactNode }) {
  return (
    <li className={`checklist-step${done ? ' checklist-done' : ''}`}>
      <span className="checklist-mark" aria-hidden="true">
        {done ? '✓' : ''}
      </span>
      <div>
        <h3>
          {title} <span className="visually-hidden">{done ? '(done)' : '(to do)'}</span>
        </h3>
        <div className="checklist-body">{children}</div>
      </div>
    </li>
  );
}

type ExampleName = 'curl' | 'node' | 'python' | 'smtp';
const EXAMPLE_LABELS: Record<ExampleName, string> = {
  curl: 'curl',
  node: 'Node.js (resend)',
  python: 'Python (requests)',
  smtp: 'SMTP',
};

/** Copyable examples with this server's URL, the verified domain, and the key just made (or a placeholder). */
export function sendingExamples(input: {
  settings: ConnectionSettings;
  domain: string | undefined;
  apiKey: string;
  to: string;
}): Record<ExampleName, string> {
  const { settings, apiKey, to } = input;
  const from = `hello@${input.domain ?? 'your-verified-domain.example'}`;
  const body = { from, to: [to], subject: 'Hello from Mailroom', text: 'It works.' };
  const json = JSON.stringify(body);
  const smtp = settings.smtp;
  const listener = smtp.listeners[0];
  return {
    curl: [
      `curl -X POST ${settings.api_url}/emails \\`,
      `  -H "Authorization: Bearer ${apiKey}" \\`,
      `  -H "Content-Type: application/json" \\`,
      `  -d '${json.replace(/'/g, `'\\''`)}'`,
    ].join('\n'),
    node: [
      `// npm install resend`,
      `import { Resend } from 'resend';`,
      ``,
      `const resend = new Resend('${apiKey}', { baseUrl: '${settings.api_url}' });`,
      `const { data, error } = await resend.emails.send({`,
      `  from: '${from}',`,
      `  to: ['${to}'],`,
      `  subject: 'Hello from Mailroom',`,
      `  text: 'It works.',`,
      `});`,
      `console.log(error ?? data.id);`,
    ].join('\n'),
    python: [
      `# pip install requests`,
      `import requests`,
      ``,
      `response = requests.post(`,
      `    "${settings.api_url}/emails",`,
      `    headers={"Authorization": "Bearer ${apiKey}"},`,
      `    json={`,
      `        "from": "${from}",`,
      `        "to": ["${to}"],`,
      `        "subject": "Hello from Mailroom",`,
      `        "text": "It works.",`,
      `    },`,
      `)`,
      `print(response.status_code, response.json())`,
    ].join('\n'),
    smtp: listener
      ? [
          `Host:      ${smtp.host}`,
          ...smtp.listeners.map(
            (each, index) =>
              `${index === 0 ? 'Port:' : '     '}      ${each.port} (${each.security === 'starttls' ? 'STARTTLS' : 'TLS from the start'})`,
          ),
          `User name: ${smtp.usernames[0] ?? 'mailroom'}`,
          `Password:  ${apiKey}`,
          `From:      ${from}`,
        ].join('\n')
      : 'SMTP submission is off on this server: the operator turns it on with MAILROOM_SUBMISSION_PORT (docs/smtp.md).',
  };
}

function Examples(props: { settings: ConnectionSettings; domain: string | undefined; apiKey: string; to: string }) {
  const [shown, setShown] = useState<ExampleName>('curl');
  const examples = sendingExamples(props);
  const names = Object.keys(EXAMPLE_LABELS) as ExampleName[];
  return (
    <section className="first-run-examples" aria-labelledby="first-run-examples-title">
      <h3 id="first-run-examples-title">Send from your code</h3>
      <p className="muted">
        {props.apiKey === KEY_PLACEHOLDER
          ? `Replace ${KEY_PLACEHOLDER} with one of your API keys (the dashboard cannot show an existing key).`
          : 'These use the key you just created: store it before leaving the page.'}
      </p>
      <div className="segmented" role="group" aria-label="Example">
        {names.map((name) => (
          <Button
            key={name}
            variant={shown === name ? 'primary' : 'secondary'}
            aria-pressed={shown === name}
            onClick={() => setShown(name)}
          >
            {EXAMPLE_LABELS[name]}
          </Button>
        ))}
      </div>
      <pre className="code-block" tabIndex={0} aria-label={`Example: ${EXAMPLE_LABELS[shown]}`}>
        {examples[shown]}
      </pre>
      <CopyButton value={examples[shown]} label={`Copy the ${EXAMPLE_LABELS[shown]} example`} />
    </section>
  );
}
