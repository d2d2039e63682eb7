import { useEffect, useRef, useState, type FormEvent } from 'react';
import { api, fieldError, type ListResponse } from '../api.ts';
import { Button, ErrorBanner, Field } from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import { useSession } from '../session.ts';
import type { Domain } from './DomainsPage.tsx';

// "Send a test email": a real message through POST /emails with the session (sessions may send like a
// key), so it is charged, delivered, tracked and listed like any other and has its own timeline.

export const TEST_SUBJECT = 'Test email from Mailroom';

/** The organization's verified domains, for From addresses. */
export function useVerifiedDomains() {
  const domains = useApiGet<ListResponse<Domain>>('/domains');
  return { ...domains, verified: (domains.data?.data ?? []).filter((domain) => domain.status === 'verified') };
}

export function SendTestEmail({ onSent }: { onSent?: (id: string) => void }) {
  const session = useSession();
  const domains = useVerifiedDomains();
  const firstDomain = domains.verified[0]?.name;
  const [from, setFrom] = useState('');
  const [to, setTo] = useState(session?.email ?? '');
  const [sent, setSent] = useState<{ id: string; to: string } | null>(null);
  // The From address waits for the domains: test@ the first verified one, once (it may then be cleared),
  // and only if nothing was typed meanwhile.
  const fromDefaulted = useRef(false);
  useEffect(() => {
    if (!firstDomain || fromDefaulted.current) return;
    fromDefaulted.current = true;
    setFrom((current) => (current === '' ? `test@${firstDomain}` : current));
  }, [firstDomain]);

  const send = useAction((message: { from: string; to: string }) =>
    api.post<{ id: string }>('/emails', {
      from: `Mailroom <${message.from}>`,
      to: [message.to],
      subject: TEST_SUBJECT,
      text: `This is a test email sent from the Mailroom dashboard by ${session?.email ?? 'you'}. If it reached you, sending works.`,
      html: `<p>This is a test email sent from the Mailroom dashboard by ${escapeHtml(session?.email ?? 'you')}.</p><p>If it reached you, sending works.</p>`,
      tags: [{ name: 'source', value: 'dashboard_test' }],
    }),
  );

  async function submit(event: FormEvent) {
    event.preventDefault();
    setSent(null);
    const result = await send.run({ from: from.trim(), to: to.trim() });
    if (result) {
      setSent({ id: result.id, to: to.trim() });
      onSent?.(result.id);
    }
  }

  if (domains.data && domains.verified.length === 0) {
    return (
      <p className="muted">
        A test email needs a From address on a verified domain: <Link to="/domains">add and verify one</Link> first.
      </p>
    );
  }
  return (
    <form className="send-test-email" onSubmit={submit} aria-label="Send a test email" noValidate>
      <Field
        label="From"
        value={from}
        onChange={(value) => (setFrom(value), send.clearError())}
        hint="An address on one of your verified domains."
        error={fieldError(send.error, 'from')}
        autoComplete="off"
        spellCheck={false}
      />
      <Field
        label="Send the test to"
        type="email"
        value={to}
        onChange={(value) => (setTo(value), send.clearError())}
        error={fieldError(send.error, 'to')}
        autoComplete="email"
        spellCheck={false}
      />
      <ErrorBanner error={domains.error} title="The domains could not be loaded" onRetry={domains.reload} />
      <ErrorBanner error={send.error} title="The test email was not sent" exceptFields={['from', 'to']} />
      <div className="button-row">
        <Button type="submit" variant="primary" busy={send.busy} busyLabel="Sending…" disabled={!domains.data}>
          Send test email
        </Button>
      </div>
      <p role="status" className={sent ? 'verify-result card' : 'visually-hidden'}>
        {sent ? (
          <>
            Sent to {sent.to}. <Link to={`/emails/${encodeURIComponent(sent.id)}`}>Follow it on its page</Link>: its
            timeline shows when it is delivered.
          </>
        ) : (
          ''
        )}
      </p>
    </form>
  );
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
