import { type ListResponse } from '../api.ts';
import { DataTable, EmptyState, ErrorBanner, Loading, PageHeader, RelativeTime } from '../components/index.ts';
import { useApiGet } from '../hooks.ts';
import { Link } from '../router.tsx';
import type { PageProps } from '../router.tsx';

export type VariableType = 'string' | 'number' | 'boolean' | 'object' | 'list';

export interface TemplateVariable {
  key: string;
  type: VariableType;
  fallback_value: unknown;
}

export interface Template {
  id: string;
  name: string;
  alias: string | null;
  from: string | null;
  reply_to: string[] | null;
  subject: string | null;
  html: string;
  text: string | null;
  variables: TemplateVariable[];
  status: 'draft' | 'published';
  published_at: string | null;
  has_unpublished_versions: boolean;
  current_version_id: string;
  created_at: string;
  updated_at: string;
}

/** The publication state in words: what sends get. */
export function statusLabel(template: Template): string {
  if (template.status === 'draft') return 'Draft';
  return template.has_unpublished_versions ? 'Published, with unpublished changes' : 'Published';
}

export function TemplatesPage(_props: PageProps) {
  const templates = useApiGet<ListResponse<Template>>('/templates');
  const list = templates.data?.data ?? [];
  return (
    <>
      <PageHeader
        title="Templates"
        description="Reusable messages with variables, to send by name."
        actions={
          <Link to="/templates/new" className="button button-primary">
            New template
          </Link>
        }
      />
      <ErrorBanner error={templates.error} title="The templates could not be loaded" onRetry={templates.reload} />
      {templates.loading && !templates.data ? <Loading label="Loading templates…" /> : null}
      {templates.data && list.length === 0 ? (
        <EmptyState
          title="No templates yet"
          action={
            <Link to="/templates/new" className="button button-primary">
              Create a template
            </Link>
          }
        >
          A template keeps a message&apos;s subject, HTML and text with {'{{variables}}'} that each send fills in; send
          it, once published, with <code>template: {'{ id, variables }'}</code> in POST /emails.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Your templates"
          rows={list}
          rowKey={(template) => template.id}
          columns={[
            { header: 'Name', cell: (template) => <Link to={`/templates/${template.id}`}>{template.name}</Link> },
            { header: 'Status', cell: (template) => statusLabel(template) },
            {
              header: 'Subject',
              className: 'hide-narrow',
              cell: (template) => template.subject ?? <span className="muted">none</span>,
            },
            {
              header: 'Variables',
              className: 'hide-narrow',
              cell: (template) => template.variables.map((variable) => variable.key).join(', ') || '—',
            },
            {
              header: 'Updated',
              className: 'nowrap',
              cell: (template) => <RelativeTime value={template.updated_at} />,
            },
          ]}
        />
      ) : null}
    </>
  );
}
