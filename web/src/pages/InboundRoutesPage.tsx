import { actionText, EMPTY_DRAFT, matchText, type InboundRoute } from './inbound-route-model.ts';
import { RouteForm } from './RouteForm.tsx';
import { useState } from 'react';
import { api, type ListResponse } from '../api.ts';
import {
  DataTable,
  EmptyState,
  ErrorBanner,
  JumpToForm,
  LearnMore,
  Loading,
  PageHeader,
  StatusBadge,
} from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';
import type { Webhook } from './WebhooksPage.tsx';

// Inbound routes: what happens to mail received at the organization's receiving domains. They are tried
// in priority order (lowest first, then oldest); a route matches on its recipient pattern and, when it
// has one, a header; its actions run; "stop" ends the walk. A recipient no route matches is stored. The
// list shows them in that order, so the page reads the way the listener walks them. The form is shared
// with a route's own page (InboundRoutePage), where a route is changed or deleted.

export function InboundRoutesPage(_props: PageProps) {
  const routes = useApiGet<ListResponse<InboundRoute>>('/inbound-routes');
  const webhooks = useApiGet<ListResponse<Webhook>>('/webhooks');
  const endpoints = webhooks.data?.data ?? [];
  // A new form after each route added, so it starts empty again; the page says what was added.
  const [formKey, setFormKey] = useState(0);
  const [added, setAdded] = useState('');
  // The API lists them in the order they are tried (lowest priority first, then oldest).
  const list = routes.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="Inbound routes"
        description={
          <>
            What happens to mail received at your domains, tried from the lowest priority up.{' '}
            <LearnMore page="receiving" section="routes" about="inbound routes" />
          </>
        }
        actions={<JumpToForm formId="add-route">New route</JumpToForm>}
      />
      <ErrorBanner error={routes.error} title="The routes could not be loaded" onRetry={routes.reload} />
      {routes.loading && !routes.data ? <Loading label="Loading routes…" /> : null}
      {routes.data && list.length === 0 ? (
        <EmptyState title="No inbound routes yet">
          Every message to a domain that receives mail is stored and shows under <Link to="/received">Received</Link>.
          Add a route below to forward it, send it to a webhook endpoint, or reject it.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <div className="stack-narrow">
          <DataTable
            caption="Inbound routes, in the order they are tried"
            captionHidden
            rows={list}
            rowKey={(route) => route.id}
            columns={[
              { header: 'Priority', className: 'numeric nowrap', cell: (route) => route.priority },
              {
                header: 'Route',
                cell: (route) => (
                  <Link to={`/inbound-routes/${encodeURIComponent(route.id)}`} className="break-anywhere">
                    {route.description || matchText(route)}
                  </Link>
                ),
              },
              {
                header: 'Recipient',
                cell: (route) => (
                  <span className="break-anywhere">
                    {matchText(route)}
                    {route.match.header ? (
                      <span className="cell-note">
                        and header {route.match.header.name} matches {route.match.header.pattern}
                      </span>
                    ) : null}
                  </span>
                ),
              },
              {
                header: 'Actions',
                cell: (route) => (
                  <span className="break-anywhere">
                    {route.actions.map((action) => actionText(action, endpoints)).join('; ')}
                    {route.stop ? <span className="cell-note">then stop</span> : null}
                  </span>
                ),
              },
              {
                header: 'State',
                className: 'nowrap',
                cell: (route) => (
                  <StatusBadge tone={route.enabled ? 'enabled' : 'disabled'}>
                    {route.enabled ? 'Enabled' : 'Disabled'}
                  </StatusBadge>
                ),
              },
            ]}
          />
        </div>
      ) : null}
      <p role="status" className="form-result">
        {added}
      </p>
      <RouteForm
        key={formKey}
        initial={EMPTY_DRAFT}
        title="Add a route"
        titleId="add-route-title"
        formId="add-route"
        submitLabel="Add route"
        busyLabel="Adding…"
        onSubmit={async (body) => {
          const created = await api.post<InboundRoute>('/inbound-routes', body);
          setAdded(`Added the route ${created.description || matchText(created)}.`);
          setFormKey((n) => n + 1);
          routes.reload();
          return created;
        }}
      />
    </>
  );
}
