import { useEffect } from 'react';
import { segment } from '../api.ts';
import {
  Button,
  DetailRow,
  EmptyState,
  ErrorBanner,
  Loading,
  PageHeader,
  RelativeTime,
  Timestamp,
} from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import type { Automation, AutomationRun, AutomationRunStep } from './automation/types.ts';
import { RunStatusBadge, stepWords } from './automation/words.tsx';

// One run of an automation (#/automations/<id>/runs/<run_id>, GET /automations/:id/runs/:run_id): its
// status and times, then each step it entered in order, with its status, times, output and error; a
// send_email step's message links to its page. While a step is about to run or running, the run is read
// again every 2 s; a run waiting out a delay or for an event is not (Refresh reads it again).

const POLL_MS = 2000;

const SKIPPED_WORDS: Record<string, string> = {
  unsubscribed: 'Not sent: the contact has unsubscribed.',
  suppressed: 'Not sent: the address is on the suppression list.',
  contact_deleted: 'Not sent: the contact was deleted.',
};

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The message an error object carries, or the object as JSON. */
function errorWords(error: Record<string, unknown>): string {
  return typeof error.message === 'string' ? error.message : JSON.stringify(error);
}

function RunStep({ step, index }: { step: AutomationRunStep; index: number }) {
  const output = isObject(step.output) ? step.output : null;
  const emailId = typeof output?.email_id === 'string' ? output.email_id : undefined;
  const skipped = output && 'skipped' in output ? String(output.skipped) : undefined;
  const title = `${index + 1}. ${stepWords(step.type)}`;
  return (
    <li className="card run-step" aria-label={`Step ${step.key}`}>
      <div className="section-head">
        <h3>
          {title} <code>{step.key}</code>
        </h3>
        <RunStatusBadge status={step.status} />
      </div>
      <dl className="details">
        <DetailRow label="Started">
          <Timestamp value={step.started_at} />
        </DetailRow>
        <DetailRow label="Completed">
          <Timestamp value={step.completed_at} />
        </DetailRow>
        {emailId ? (
          <DetailRow label="Email sent">
            <Link to={`/emails/${encodeURIComponent(emailId)}`}>
              <code className="break-anywhere">{emailId}</code>
            </Link>
          </DetailRow>
        ) : null}
      </dl>
      {skipped !== undefined ? <p className="muted">{SKIPPED_WORDS[skipped] ?? `Skipped: ${skipped}.`}</p> : null}
      {step.error ? (
        <p className="attempt-error" role="note">
          {errorWords(step.error)}
        </p>
      ) : null}
      {step.output !== null && step.output !== undefined ? (
        <details>
          <summary>
            Output<span className="visually-hidden"> of {step.key}</span>
          </summary>
          <pre className="code-block run-step-output" tabIndex={0} aria-label={`The output of ${step.key}`}>
            {JSON.stringify(step.output, null, 2)}
          </pre>
        </details>
      ) : null}
      {step.error ? (
        <details>
          <summary>
            Error<span className="visually-hidden"> of {step.key}</span>
          </summary>
          <pre className="code-block run-step-output" tabIndex={0} aria-label={`The error of ${step.key}`}>
            {JSON.stringify(step.error, null, 2)}
          </pre>
        </details>
      ) : null}
    </li>
  );
}

export function AutomationRunPage({ params }: PageProps) {
  const automationId = params.id ?? '';
  const runId = params.run_id ?? '';
  const automation = useApiGet<Automation>(`/automations/${segment(automationId)}`);
  const run = useApiGet<AutomationRun>(`/automations/${segment(automationId)}/runs/${segment(runId)}`);
  const data = run.data;
  const moving =
    data !== undefined &&
    data.status === 'running' &&
    data.steps.some((step) => step.status === 'pending' || step.status === 'running');
  const { reload, loading } = run;
  useEffect(() => {
    if (!moving || loading) return;
    const timer = window.setTimeout(reload, POLL_MS);
    return () => window.clearTimeout(timer);
  }, [moving, loading, reload, data]);

  const back = (
    <Link to={`/automations/${encodeURIComponent(automationId)}`}>
      {automation.data ? `“${automation.data.name}”` : 'The automation'}
    </Link>
  );
  return (
    <>
      <PageHeader
        title="Automation run"
        description={back}
        actions={
          data ? (
            <Button onClick={reload} busy={loading && !moving} busyLabel="Refreshing…">
              Refresh
            </Button>
          ) : null
        }
      />
      <ErrorBanner error={run.error} title="The run could not be loaded" onRetry={reload} />
      {loading && !data ? <Loading label="Loading the run…" /> : null}
      {data ? (
        <>
          <section className="card" aria-labelledby="summary-title">
            <h2 id="summary-title">Summary</h2>
            <dl className="details">
              <DetailRow label="Status">
                <RunStatusBadge status={data.status} />
              </DetailRow>
              {data.contact_email || data.contact_id ? (
                <DetailRow label="Contact">
                  {data.contact_id ? (
                    <Link to={`/contacts/${encodeURIComponent(data.contact_id)}`} className="break-anywhere">
                      {data.contact_email ?? data.contact_id}
                    </Link>
                  ) : (
                    <span className="break-anywhere">{data.contact_email}</span>
                  )}
                </DetailRow>
              ) : null}
              <DetailRow label="Started">
                <Timestamp value={data.started_at} />
              </DetailRow>
              <DetailRow label="Ended">
                {data.completed_at ? <Timestamp value={data.completed_at} /> : <span className="muted">Not yet</span>}
              </DetailRow>
              <DetailRow label="Created">
                <RelativeTime value={data.created_at} />
              </DetailRow>
              <DetailRow label="ID">
                <code className="break-anywhere">{data.id}</code>
              </DetailRow>
            </dl>
          </section>
          <section aria-labelledby="steps-title">
            <h2 id="steps-title">Steps</h2>
            <p role="status" className="muted">
              {moving ? 'A step is under way: the run is read again every few seconds.' : ''}
            </p>
            {data.steps.length === 0 ? (
              <EmptyState title="No step entered yet">
                The run enters its trigger as soon as a worker takes it.
              </EmptyState>
            ) : (
              <ol className="run-steps">
                {data.steps.map((step, index) => (
                  <RunStep key={`${step.key}:${index}`} step={step} index={index} />
                ))}
              </ol>
            )}
          </section>
        </>
      ) : null}
    </>
  );
}
