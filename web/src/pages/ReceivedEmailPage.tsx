import type { ReceivedEmail } from './received-email-model.ts';
import { Attachments, Checks, Content, Details, Handling, Source } from './ReceivedEmailSections.tsx';
import { ApiError, segment } from '../api.ts';
import { EmptyState, ErrorBanner, Loading, PageHeader } from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';

// One received message: who sent it to whom, whether its sender's authentication held (SPF, DKIM, DMARC,
// ARC) and what the spam filter thought, the sent message it answers, the routes that handled it, its
// HTML in a sandboxed frame, its text and the reply without its quoted history, its attachments and its
// raw source. Everything from the message is rendered as text by React; its HTML only by the browser
// inside a frame with an empty sandbox (no script, no same origin, no forms), under the dashboard's
// policy, which loads images from data: URIs only (the HTML is asked for with its cid: images inlined),
// so nothing remote tells the sender the message was opened.

export function ReceivedEmailPage({ params }: PageProps) {
  const id = params.id ?? '';
  const base = `/emails/receiving/${segment(id)}`;
  const email = useApiGet<ReceivedEmail>(base, { html_format: 'data_uri' });
  const notFound = email.error instanceof ApiError && email.error.status === 404;
  const data = email.data;
  return (
    <>
      <PageHeader
        title={data ? data.subject || '(no subject)' : 'Received email'}
        description={<Link to="/received">← All received emails</Link>}
      />
      {notFound ? (
        <EmptyState title="No such received email" action={<Link to="/received">Back to the received emails</Link>}>
          It is not one of your organization&apos;s received messages, or retention deleted it.
        </EmptyState>
      ) : (
        <ErrorBanner error={email.error} title="The received email could not be loaded" onRetry={email.reload} />
      )}
      {!data && email.loading ? <Loading label="Loading the received email…" /> : null}
      {data ? (
        <>
          <Details email={data} />
          <Checks email={data} />
          <Handling email={data} />
          <Content email={data} base={base} />
          <Attachments base={base} count={data.attachments?.length ?? 0} />
          <Source email={data} />
        </>
      ) : null}
    </>
  );
}
