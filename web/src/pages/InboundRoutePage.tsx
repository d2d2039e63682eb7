import { api, ApiError, segment } from '../api.ts';
import { ConfirmButton, EmptyState, ErrorBanner, Loading, PageHeader, Timestamp } from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link, navigate } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import { draftOf, matchText, type InboundRoute } from './inbound-route-model.ts';
import { RouteForm } from './RouteForm.tsx';

// One inbound route: the same form as on the list, filled with the route, saved with PATCH; and delete.

export function InboundRoutePage({ params }: PageProps) {
  const id = params.id ?? '';
  const path = `/inbound-routes/${segment(id)}`;
  const route = useApiGet<InboundRoute>(path);
  const notFound = route.error instanceof ApiError && route.error.status === 404;
  const data = route.data;
  return (
    <>
      <PageHeader
        title={data ? data.description || matchText(data) : 'Inbound route'}
        description={
          <>
            <Link to="/inbound-routes">← All inbound routes</Link>
            {data ? (
              <>
                {' · '}added <Timestamp value={data.created_at} />, changed <Timestamp value={data.updated_at} />
              </>
            ) : null}
          </>
        }
      />
      {notFound ? (
        <EmptyState title="No such inbound route" action={<Link to="/inbound-routes">Back to the inbound routes</Link>}>
          It is not one of your organization&apos;s routes, or it was deleted.
        </EmptyState>
      ) : (
        <ErrorBanner error={route.error} title="The route could not be loaded" onRetry={route.reload} />
      )}
      {!data && route.loading ? <Loading label="Loading the route…" /> : null}
      {data ? (
        <>
          <RouteForm
            key={data.id}
            initial={draftOf(data)}
            title="Change the route"
            titleId="edit-route-title"
            submitLabel="Save route"
            busyLabel="Saving…"
            onSubmit={async (body) => {
              const saved = await api.patch<InboundRoute>(path, body);
              // The title and times above follow; the form keeps what was typed (it is what was saved).
              route.reload();
              return saved;
            }}
          />
          <section className="card" aria-labelledby="delete-route-title">
            <h2 id="delete-route-title">Delete</h2>
            <p className="muted">Mail it matched goes to the next route, or is stored when none matches.</p>
            <ConfirmButton
              question="Delete this route? It stops applying at once."
              busyLabel="Deleting…"
              onConfirm={async () => {
                await api.delete(path);
                navigate('/inbound-routes');
              }}
            >
              Delete route
            </ConfirmButton>
          </section>
        </>
      ) : null}
    </>
  );
}
