import { useState, type FormEvent } from 'react';
import { api, fieldError, segment, type ListResponse } from '../api.ts';
import {
  Button,
  ConfirmButton,
  CopyableId,
  DataTable,
  EmptyState,
  ErrorBanner,
  Field,
  formatNumber,
  JumpToForm,
  LearnMore,
  Loading,
  PageHeader,
  RelativeTime,
  TextAreaField,
} from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import type { PageProps } from '../router.tsx';

export interface Segment {
  id: string;
  name: string;
  created_at: string;
  /** How many contacts are in it. */
  contacts_count: number;
  /** Which contacts it also holds besides those added to it: a rule tree, or null for members only. */
  filter?: SegmentFilter | null;
}

/**
 * A segment's filter: rules on contact fields (email, first_name, last_name, unsubscribed, created_at),
 * properties (`properties.<key>`) and topics (`topics.<topic id>`), combined with and / or, negated with
 * not, nested.
 */
export type SegmentFilter = SegmentGroup | SegmentNot | SegmentRule;

export interface SegmentGroup {
  type: 'and' | 'or';
  rules: SegmentFilter[];
}

export interface SegmentNot {
  type: 'not';
  rule: SegmentFilter;
}

export interface SegmentRule {
  type: 'rule';
  field: string;
  operator: string;
  value?: unknown;
}

/** A filter in words: `properties.plan eq "pro" and (properties.seats gt 3 or …)`. */
export function filterWords(filter: SegmentFilter): string {
  const nested = (node: SegmentFilter) => (node.type === 'rule' ? filterWords(node) : `(${filterWords(node)})`);
  if (filter.type === 'rule') {
    return `${filter.field} ${filter.operator}${filter.value === undefined ? '' : ` ${JSON.stringify(filter.value)}`}`;
  }
  if (filter.type === 'not') return `not ${nested(filter.rule)}`;
  return (filter.rules ?? []).map(nested).join(` ${filter.type} `) || '(no rules)';
}

const FILTER_EXAMPLE =
  '{"type": "and", "rules": [{"type": "rule", "field": "properties.plan", "operator": "eq", "value": "pro"}]}';

/** The filter field's text as the API takes it: undefined when empty, or the reason it is not JSON. */
function parseFilter(text: string): { filter: unknown } | { error: string } {
  if (text.trim() === '') return { filter: undefined };
  try {
    return { filter: JSON.parse(text) as unknown };
  } catch (error) {
    return { error: `Not valid JSON: ${error instanceof Error ? error.message : 'cannot be read'}` };
  }
}

/** Changes one segment's filter (PATCH /segments/:id); an empty field removes it. */
function FilterEditor({ item, onDone }: { item: Segment; onDone: () => void }) {
  const [text, setText] = useState(item.filter ? JSON.stringify(item.filter, null, 2) : '');
  const [jsonError, setJsonError] = useState<string | undefined>(undefined);
  const change = useAction((filter: unknown) =>
    api.patch(`/segments/${segment(item.id)}`, { name: item.name, filter: filter ?? null }),
  );

  async function submit(event: FormEvent) {
    event.preventDefault();
    const parsed = parseFilter(text);
    if ('error' in parsed) {
      setJsonError(parsed.error);
      return;
    }
    setJsonError(undefined);
    if ((await change.run(parsed.filter)) !== undefined) onDone();
  }

  return (
    <form onSubmit={submit} aria-label={`Filter of ${item.name}`} noValidate>
      <TextAreaField
        label={`Filter of ${item.name} (JSON)`}
        hint="Empty: only the contacts added to it."
        value={text}
        rows={5}
        onChange={(value) => (setText(value), setJsonError(undefined), change.clearError())}
        error={jsonError ?? fieldError(change.error, 'filter')}
        spellCheck={false}
      />
      <ErrorBanner error={change.error} title="The filter could not be saved" exceptFields={['filter']} />
      <Button type="submit" busy={change.busy} busyLabel="Saving…">
        Save filter<span className="visually-hidden"> of {item.name}</span>
      </Button>
    </form>
  );
}

function SegmentForm({ onDone }: { onDone: () => void }) {
  const [name, setName] = useState('');
  const [filterText, setFilterText] = useState('');
  const [jsonError, setJsonError] = useState<string | undefined>(undefined);
  const create = useAction((body: { name: string; filter?: unknown }) => api.post('/segments', body));

  async function submit(event: FormEvent) {
    event.preventDefault();
    const parsed = parseFilter(filterText);
    if ('error' in parsed) {
      setJsonError(parsed.error);
      return;
    }
    setJsonError(undefined);
    const body: { name: string; filter?: unknown } = { name: name.trim() };
    if (parsed.filter !== undefined) body.filter = parsed.filter;
    const result = await create.run(body);
    if (result !== undefined) {
      setName('');
      setFilterText('');
      onDone();
    }
  }

  return (
    <form id="create-segment" className="card" onSubmit={submit} aria-labelledby="create-segment-title" noValidate>
      <h3 id="create-segment-title">Add a segment</h3>
      <Field
        label="Segment name"
        value={name}
        maxLength={200}
        onChange={(value) => (setName(value), create.clearError())}
        error={fieldError(create.error, 'name')}
        autoComplete="off"
      />
      <TextAreaField
        label="Filter (JSON)"
        hint={
          <>
            Optional: the segment also holds every contact the rules match, e.g. <code>{FILTER_EXAMPLE}</code>
          </>
        }
        value={filterText}
        rows={4}
        onChange={(value) => (setFilterText(value), setJsonError(undefined), create.clearError())}
        error={jsonError ?? fieldError(create.error, 'filter')}
        spellCheck={false}
      />
      <ErrorBanner error={create.error} exceptFields={['name', 'filter']} />
      <Button type="submit" variant="primary" busy={create.busy} busyLabel="Adding…">
        Add segment
      </Button>
    </form>
  );
}

const members = (count: number) => (count === 1 ? '1 contact' : `${formatNumber(count)} contacts`);

export function SegmentsPage(_props: PageProps) {
  const segments = useApiGet<ListResponse<Segment>>('/segments');
  const list = segments.data?.data ?? [];
  // The segment whose filter is being changed, if any.
  const [editing, setEditing] = useState<string | null>(null);
  return (
    <>
      <PageHeader
        title="Segments"
        description={
          <>
            Named groups of contacts (Resend&apos;s audiences), added by hand or matched by a filter.{' '}
            <LearnMore page="audience" section="segments-and-audiences" about="segments" />
          </>
        }
        actions={<JumpToForm formId="create-segment">New segment</JumpToForm>}
      />
      <ErrorBanner error={segments.error} title="The segments could not be loaded" onRetry={segments.reload} />
      {segments.loading && !segments.data ? <Loading label="Loading segments…" /> : null}
      {segments.data && list.length === 0 ? (
        <EmptyState title="No segments yet">
          Add one below, then put contacts in it on their page or with <code>segments</code> in{' '}
          <code>POST /contacts</code>.
        </EmptyState>
      ) : null}
      {list.length > 0 ? (
        <DataTable
          caption="Segments"
          captionHidden
          rows={list}
          rowKey={(item) => item.id}
          columns={[
            { header: 'Segment', cell: (item) => <strong>{item.name}</strong> },
            { header: 'Members', className: 'nowrap', cell: (item) => members(item.contacts_count) },
            {
              header: 'Filter',
              cell: (item) => (
                <>
                  {item.filter ? <code className="break-anywhere">{filterWords(item.filter)}</code> : 'Members only'}
                  <div>
                    <Button
                      variant="quiet"
                      aria-expanded={editing === item.id}
                      onClick={() => setEditing(editing === item.id ? null : item.id)}
                    >
                      {editing === item.id ? 'Close' : 'Change filter'}
                      <span className="visually-hidden"> of {item.name}</span>
                    </Button>
                  </div>
                  {editing === item.id ? (
                    <FilterEditor
                      item={item}
                      onDone={() => {
                        setEditing(null);
                        segments.reload();
                      }}
                    />
                  ) : null}
                </>
              ),
            },
            {
              header: 'ID',
              className: 'hide-narrow',
              cell: (item) => <CopyableId id={item.id} of={item.name} />,
            },
            {
              header: 'Added',
              className: 'nowrap hide-narrow',
              cell: (item) => <RelativeTime value={item.created_at} />,
            },
            {
              header: 'Actions',
              cell: (item) => (
                <ConfirmButton
                  question={`Delete “${item.name}”? Its ${members(item.contacts_count)} stay, outside it.`}
                  busyLabel="Deleting…"
                  onConfirm={async () => {
                    await api.delete(`/segments/${segment(item.id)}`);
                    segments.reload();
                  }}
                >
                  <span>
                    Delete<span className="visually-hidden"> {item.name}</span>
                  </span>
                </ConfirmButton>
              ),
            },
          ]}
        />
      ) : null}
      <SegmentForm onDone={segments.reload} />
    </>
  );
}
