import { useId, useState, type FormEvent } from 'react';
import { api, fieldError, type ListResponse } from '../api.ts';
import { Button, CheckboxField, ErrorBanner, SelectField } from '../components/index.ts';
import { useAction, useApiGet } from '../hooks.ts';
import { navigate } from '../router.tsx';
import type { ContactProperty, PropertyType } from './ContactPropertiesPage.tsx';
import type { Segment } from './SegmentsPage.tsx';

// The form that starts a contact import: the browser reads only the file's header row (its first record,
// within the first 64 KB), so a file of any size can be mapped at once; the whole file is uploaded as it
// is and read by the server.

/** How much of the header row the browser reads at most. */
const HEADER_BYTES = 64 * 1024;

/**
 * The first record of CSV text (commas, double quotes doubled inside quoted fields, CRLF or LF), or
 * undefined when the text ends before the record does.
 */
export function firstRecord(text: string): string[] | undefined {
  const fields: string[] = [];
  let field = '';
  let quoted = false;
  for (let index = 0; index < text.length; index++) {
    const char = text[index]!;
    if (quoted) {
      if (char === '"' && text[index + 1] === '"') {
        field += '"';
        index++;
      } else if (char === '"') quoted = false;
      else field += char;
    } else if (char === '"' && field === '') quoted = true;
    else if (char === ',') {
      fields.push(field);
      field = '';
    } else if (char === '\n' || char === '\r') {
      fields.push(field);
      return fields;
    } else field += char;
  }
  return undefined;
}

/** The header row of a file, read from its first bytes only. */
async function readHeader(file: File): Promise<string[]> {
  const head = await file.slice(0, HEADER_BYTES).text();
  const text = head.replace(/^\uFEFF/, '');
  // A file of one line without a line break: its first 64 KB are the whole file.
  const record = firstRecord(text) ?? (file.size <= HEADER_BYTES ? firstRecord(`${text}\n`) : undefined);
  if (!record) throw new Error('The header row could not be found in the first 64 KB of the file.');
  const columns = record.map((column) => column.trim());
  if (columns.every((column) => column === '')) throw new Error('The first row of the file is empty.');
  return columns;
}

/** What a column is imported as: nothing, a contact field, an existing property, or a new property. */
type Target =
  'skip' | 'email' | 'first_name' | 'last_name' | 'unsubscribed' | `property:${string}` | `new:${PropertyType}`;

/** "First Name" → "first_name": a property key from a header (letters, digits, underscores). */
export function keyOf(header: string): string {
  const key = header
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 50);
  return /^[0-9]/.test(key) ? `_${key}`.slice(0, 50) : key || 'column';
}

/** The target a header most likely means: contact fields by their usual names, properties by their key. */
export function guessTarget(header: string, properties: ContactProperty[]): Target {
  const name = header.toLowerCase().replace(/[^a-z0-9]/g, '');
  if (['email', 'emailaddress', 'mail', 'email1'].includes(name)) return 'email';
  if (['firstname', 'first', 'givenname', 'forename'].includes(name)) return 'first_name';
  if (['lastname', 'last', 'surname', 'familyname'].includes(name)) return 'last_name';
  if (['unsubscribed', 'optedout', 'optout', 'unsubscribe'].includes(name)) return 'unsubscribed';
  const property = properties.find((item) => item.key.toLowerCase().replace(/[^a-z0-9]/g, '') === name);
  return property ? `property:${property.key}` : 'skip';
}

/** The column_map the API takes, or the reason the mapping is not one. */
export function columnMapOf(
  columns: string[],
  targets: Target[],
  properties: ContactProperty[],
): { map: Record<string, unknown> } | { error: string } {
  const map: Record<string, unknown> = {};
  const mapped: Record<string, { column: string; type: PropertyType }> = {};
  for (const [index, target] of targets.entries()) {
    const column = columns[index]!;
    if (target === 'skip') continue;
    if (target.startsWith('property:') || target.startsWith('new:')) {
      const existing = target.startsWith('property:')
        ? properties.find((item) => item.key === target.slice('property:'.length))
        : undefined;
      const key = existing ? existing.key : keyOf(column);
      const type: PropertyType = existing ? existing.type : (target.slice('new:'.length) as PropertyType);
      if (mapped[key]) return { error: `Two columns are imported as the property ${key}.` };
      mapped[key] = { column, type };
      continue;
    }
    if (map[target] !== undefined) return { error: `Two columns are imported as ${target.replace('_', ' ')}.` };
    map[target] = column;
  }
  if (map.email === undefined) return { error: 'Choose the column that holds the email address.' };
  if (Object.keys(mapped).length > 0) map.properties = mapped;
  return { map };
}

export function ImportForm() {
  const fileId = useId();
  const properties = useApiGet<ListResponse<ContactProperty>>('/contact-properties');
  const segments = useApiGet<ListResponse<Segment>>('/segments');
  const [file, setFile] = useState<File | null>(null);
  const [columns, setColumns] = useState<string[]>([]);
  const [targets, setTargets] = useState<Target[]>([]);
  const [fileError, setFileError] = useState<string | undefined>(undefined);
  const [mapError, setMapError] = useState<string | undefined>(undefined);
  const [onConflict, setOnConflict] = useState<'upsert' | 'skip'>('upsert');
  const [chosenSegments, setChosenSegments] = useState<string[]>([]);
  // A column imported as a new property: the property is made first (the import takes only existing ones).
  const upload = useAction(async (form: FormData, newProperties: Array<{ key: string; type: PropertyType }>) => {
    for (const property of newProperties) await api.post('/contact-properties', property);
    return api.upload<{ id: string }>('/contacts/imports', form);
  });
  const propertyList = properties.data?.data ?? [];

  async function choose(chosen: File | undefined) {
    setFile(chosen ?? null);
    setColumns([]);
    setTargets([]);
    setFileError(undefined);
    setMapError(undefined);
    upload.clearError();
    if (!chosen) return;
    try {
      const header = await readHeader(chosen);
      setColumns(header);
      setTargets(header.map((column) => guessTarget(column, propertyList)));
    } catch (error) {
      setFileError(error instanceof Error ? error.message : 'The file could not be read.');
    }
  }

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (!file) {
      setFileError('Choose a CSV file.');
      return;
    }
    if (columns.length === 0) return;
    const mapping = columnMapOf(columns, targets, propertyList);
    if ('error' in mapping) {
      setMapError(mapping.error);
      return;
    }
    setMapError(undefined);
    const form = new FormData();
    form.append('column_map', JSON.stringify(mapping.map));
    form.append('on_conflict', onConflict);
    form.append('segments', JSON.stringify(chosenSegments.map((id) => ({ id }))));
    // The file last: the server can read the fields before it streams the file.
    form.append('file', file, file.name);
    const existing = new Set(propertyList.map((property) => property.key));
    const properties = (mapping.map.properties ?? {}) as Record<string, { type: PropertyType }>;
    const newProperties = Object.entries(properties)
      .filter(([key]) => !existing.has(key))
      .map(([key, { type }]) => ({ key, type }));
    const result = await upload.run(form, newProperties);
    if (result) navigate(`/imports/${encodeURIComponent(result.id)}`);
  }

  const options: Array<{ value: string; label: string }> = [
    { value: 'skip', label: 'Do not import' },
    { value: 'email', label: 'Email' },
    { value: 'first_name', label: 'First name' },
    { value: 'last_name', label: 'Last name' },
    { value: 'unsubscribed', label: 'Unsubscribed (true or false)' },
    ...propertyList.map((property) => ({
      value: `property:${property.key}`,
      label: `Property ${property.key} (${property.type === 'number' ? 'number' : 'text'})`,
    })),
  ];
  const fileHintId = `${fileId}-hint`;
  const fileErrorText = fileError ?? fieldError(upload.error, 'file');
  const fileErrorId = fileErrorText ? `${fileId}-error` : undefined;

  return (
    <form id="import-form" className="card" onSubmit={submit} aria-labelledby="import-form-title" noValidate>
      <h2 id="import-form-title">Import a CSV file</h2>
      <ErrorBanner
        error={properties.error ?? segments.error}
        title="Your contact properties and segments could not be loaded (an import can still add contacts)"
        onRetry={() => (properties.reload(), segments.reload())}
      />
      <div className="field">
        <label htmlFor={fileId}>CSV file</label>
        <input
          id={fileId}
          type="file"
          accept=".csv,text/csv"
          aria-describedby={[fileHintId, fileErrorId].filter(Boolean).join(' ')}
          aria-invalid={fileErrorText ? true : undefined}
          onChange={(event) => void choose(event.target.files?.[0])}
        />
        <p className="field-hint" id={fileHintId}>
          Comma-separated, with a header row naming the columns. Only the header is read here; the whole file is
          uploaded when you import it.
        </p>
        {fileErrorText ? (
          <p className="field-error" id={fileErrorId}>
            {fileErrorText}
          </p>
        ) : null}
      </div>

      {columns.length > 0 ? (
        <fieldset className="variables">
          <legend>Columns</legend>
          <p className="field-hint">
            What each column of the file becomes. One column must be the email address; a column whose header names a
            property is imported as it.
          </p>
          {columns.map((column, index) => {
            const key = keyOf(column);
            const columnOptions = [
              ...options,
              ...(propertyList.some((property) => property.key === key)
                ? []
                : [
                    { value: 'new:string', label: `New text property ${key}` },
                    { value: 'new:number', label: `New number property ${key}` },
                  ]),
            ];
            return (
              <SelectField
                key={`${index}:${column}`}
                label={`Column “${column || `${index + 1}`}”`}
                value={targets[index] ?? 'skip'}
                options={columnOptions}
                onChange={(value) => {
                  setTargets(targets.map((target, at) => (at === index ? (value as Target) : target)));
                  setMapError(undefined);
                }}
              />
            );
          })}
          {mapError || fieldError(upload.error, 'column_map') ? (
            <p className="field-error" role="alert">
              {mapError ?? fieldError(upload.error, 'column_map')}
            </p>
          ) : null}
        </fieldset>
      ) : null}

      <SelectField
        label="Contacts already there"
        hint="A row whose email is already a contact's."
        value={onConflict}
        onChange={(value) => setOnConflict(value as 'upsert' | 'skip')}
        options={[
          { value: 'upsert', label: 'Update them with the file’s values' },
          { value: 'skip', label: 'Leave them as they are (the row is skipped)' },
        ]}
        error={fieldError(upload.error, 'on_conflict')}
      />
      {(segments.data?.data ?? []).length > 0 ? (
        <fieldset className="variables">
          <legend>Add the contacts to segments</legend>
          {(segments.data?.data ?? []).map((item) => (
            <CheckboxField
              key={item.id}
              label={item.name}
              checked={chosenSegments.includes(item.id)}
              onChange={(checked) =>
                setChosenSegments(
                  checked ? [...chosenSegments, item.id] : chosenSegments.filter((chosen) => chosen !== item.id),
                )
              }
            />
          ))}
          {fieldError(upload.error, 'segments') ? (
            <p className="field-error">{fieldError(upload.error, 'segments')}</p>
          ) : null}
        </fieldset>
      ) : null}
      <ErrorBanner
        error={upload.error}
        title="The file could not be imported"
        exceptFields={['file', 'column_map', 'on_conflict', 'segments']}
      />
      <Button type="submit" variant="primary" busy={upload.busy} busyLabel="Uploading…">
        Import contacts
      </Button>
    </form>
  );
}
