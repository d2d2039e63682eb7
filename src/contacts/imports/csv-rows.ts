import { Readable } from 'node:stream';
import { CsvError, parse, type Info } from 'csv-parse';
import type { Queryable } from '../../platform/db/database.ts';
import { parseMailbox } from '../../platform/addresses.ts';
import { PROPERTY_STRING_MAX, type PropertyValue } from '../contact-properties.ts';
import type { ColumnMap } from './import-options.ts';

// Reading a stored upload: its chunks, one at a time, through csv-parse (streaming: memory holds a chunk
// and the records not yet written, never the file), and each record turned into a contact's fields or
// the reason it cannot be one. Rows are numbered as a spreadsheet shows them when every row is one line:
// the header is row 1, the first contact row 2; a blank line is skipped and not counted.

/** A record longer than this (all its fields together) is a CSV the reader refuses. */
const MAX_RECORD_BYTES = 1024 * 1024;
/** As POST /contacts allows for a name. */
const NAME_MAX = 200;

/** The file's chunks in order, read from the database one at a time. */
export function storedFile(db: Queryable, importId: string): Readable {
  return Readable.from(
    (async function* () {
      for (let seq = 0; ; seq++) {
        const { rows } = await db.query<{ data: Uint8Array }>(
          'SELECT data FROM contact_import_chunks WHERE import_id = $1 AND seq = $2',
          [importId, seq],
        );
        if (!rows[0]) return;
        const data = rows[0].data;
        yield Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      }
    })(),
    { objectMode: false },
  );
}

export interface CsvRecord {
  /** Its row in the file: the header is row 1. */
  row: number;
  cells: string[];
}

/**
 * The file's records with their row numbers. A byte-order mark is dropped, CRLF and LF both end a row,
 * quoted fields may hold separators, quotes ("") and line breaks, and rows may have fewer or more cells
 * than the header. A CSV syntax error (a quote never closed, text after a closing quote) throws an error
 * whose `code` starts with CSV_: past it the file cannot be read reliably.
 */
export async function* csvRecords(file: Readable): AsyncGenerator<CsvRecord> {
  const parser = file.pipe(
    parse({
      bom: true,
      relax_column_count: true,
      skip_empty_lines: true,
      info: true,
      max_record_size: MAX_RECORD_BYTES,
      // A syntax error is reported as a skip, not as the stream's error, which would drop the records
      // parsed before it and not yet read here. Records after it are not trusted: reading stops there.
      skip_records_with_error: true,
    }),
  );
  file.on('error', (error) => parser.destroy(error));
  let syntaxError: (Error & { records: number }) | undefined;
  parser.on('skip', (error: Error & { records: number }) => (syntaxError ??= error));
  for await (const { record, info } of parser as AsyncIterable<{ record: string[]; info: Info }>) {
    if (syntaxError && info.records > syntaxError.records) throw syntaxError;
    yield { row: info.records, cells: record };
  }
  if (syntaxError) throw syntaxError;
}

export const isCsvError = (error: unknown): error is CsvError => error instanceof CsvError;

/** What is wrong with the file, for a person to fix: the row it is on (the header is row 1) and what to do. */
export function describeCsvError(error: CsvError): string {
  const row = Number((error as CsvError & { records?: number }).records ?? 0) + 1;
  const where = row === 1 ? 'row 1 (the header row)' : `row ${row}`;
  const what = CSV_PROBLEMS[error.code.replace(/^CSV_/, '')] ?? error.message;
  return `${where}: ${what}${row > 1 ? '; the rows before it were imported' : ''}`;
}

const DOUBLE_IT = 'a quote inside a quoted field is written twice: "5"" screen"';
const CSV_PROBLEMS: Record<string, string> = {
  INVALID_OPENING_QUOTE: `a quote inside a field that does not start with one (remove it, or quote the whole field: ${DOUBLE_IT})`,
  QUOTE_NOT_CLOSED: `a quote opens a field and is never closed (${DOUBLE_IT})`,
  INVALID_CLOSING_QUOTE: `text after the closing quote of a field (${DOUBLE_IT})`,
  MAX_RECORD_SIZE: 'a row longer than 1 MiB (a quote never closed?)',
};

/**
 * Why a stored upload is not a CSV file at all, read from its first chunk (about 1 MiB) before any
 * parsing, or undefined: binary data (NUL bytes: a spreadsheet, a zip, an image) or bytes that are not
 * UTF-8 (a file saved in a Windows code page would otherwise import as garbled names).
 */
export async function notCsvReason(db: Queryable, importId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ head: Uint8Array }>(
    'SELECT data AS head FROM contact_import_chunks WHERE import_id = $1 AND seq = 0',
    [importId],
  );
  if (!rows[0]) return undefined;
  const head = Buffer.from(rows[0].head.buffer, rows[0].head.byteOffset, rows[0].head.byteLength);
  if ((head[0] === 0xff && head[1] === 0xfe) || (head[0] === 0xfe && head[1] === 0xff)) {
    return 'not a CSV file in UTF-8: the upload is UTF-16 text (export it as "CSV UTF-8")';
  }
  if (head.includes(0)) {
    return 'not a CSV file: the upload looks like binary data (a spreadsheet? export it as CSV)';
  }
  try {
    // `stream`: a character cut by the chunk's end is not an error.
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: true });
  } catch {
    return 'not a CSV file in UTF-8: the upload has bytes that are not UTF-8 text (export or save it as "CSV UTF-8")';
  }
  return undefined;
}

/** Where each field is in the records, found from the header row. */
export interface ColumnPositions {
  email: number;
  first_name?: number;
  last_name?: number;
  unsubscribed?: number;
  properties: Array<{ key: string; type: 'string' | 'number'; index: number; column: string }>;
  /** The header row (errors name the column at fault as it does). */
  header: string[];
}

/** A header is matched without case and without surrounding spaces; without a column map, `First Name` finds first_name. */
const normalized = (name: string) => name.trim().toLowerCase();
const asFieldName = (name: string) => normalized(name).replace(/[\s-]+/g, '_');

/**
 * The positions of the mapped columns in the header, or why the file cannot be imported: a column the
 * map names is not in it (or, without a map, there is no email column).
 */
export function columnPositions(header: string[], map: ColumnMap | undefined): ColumnPositions | { failure: string } {
  const find = (column: string) => {
    const exact = header.indexOf(column);
    return exact >= 0 ? exact : header.findIndex((name) => normalized(name) === normalized(column));
  };
  if (!map) {
    const byField = (field: string) => {
      const index = header.findIndex((name) => asFieldName(name) === field);
      return index >= 0 ? index : undefined;
    };
    const email = byField('email');
    if (email === undefined) {
      return { failure: 'the header row has no email column (name it "email", or send a column_map)' };
    }
    return {
      email,
      first_name: byField('first_name'),
      last_name: byField('last_name'),
      unsubscribed: byField('unsubscribed'),
      properties: [],
      header,
    };
  }
  const missing: string[] = [];
  const position = (column: string | undefined) => {
    if (column === undefined) return undefined;
    const index = find(column);
    if (index < 0) missing.push(column);
    return index;
  };
  const positions: ColumnPositions = {
    email: position(map.email)!,
    first_name: position(map.first_name),
    last_name: position(map.last_name),
    unsubscribed: position(map.unsubscribed),
    properties: Object.entries(map.properties).map(([key, { column, type }]) => ({
      key,
      type,
      column,
      index: position(column)!,
    })),
    header,
  };
  if (missing.length > 0) {
    return {
      failure: `column_map names ${missing.length === 1 ? 'a column' : 'columns'} the header row does not have: ${missing.map((name) => JSON.stringify(name)).join(', ')}`,
    };
  }
  return positions;
}

/** A row as a contact's fields: null for a name not given (an empty cell), undefined unsubscribed likewise. */
export interface ContactFields {
  row: number;
  email: string;
  first_name: string | null;
  last_name: string | null;
  unsubscribed: boolean | null;
  properties: Record<string, PropertyValue>;
}

export interface RowError {
  row: number;
  column: string | null;
  message: string;
}

const TRUE = new Set(['true', 'yes', 'y', '1', 't']);
const FALSE = new Set(['false', 'no', 'n', '0', 'f']);

/** The row's contact, or the first thing wrong with it. Cells are trimmed; an empty cell gives no value. */
export function contactOfRow(record: CsvRecord, at: ColumnPositions): ContactFields | RowError {
  const cell = (index: number | undefined) => (index === undefined ? '' : (record.cells[index] ?? '').trim());
  const error = (index: number | null, message: string): RowError => ({
    row: record.row,
    column: index === null ? null : (at.header[index] ?? null),
    message,
  });
  // PostgreSQL's text cannot hold U+0000.
  const unstorable = record.cells.findIndex((value) => value.includes('\u0000'));
  if (unstorable >= 0) return error(unstorable, 'the cell contains U+0000, which cannot be stored');
  const rawEmail = cell(at.email);
  if (rawEmail === '') return error(at.email, 'no address: the email cell is empty');
  let email: string;
  try {
    const mailbox = parseMailbox(rawEmail, 'email');
    if (mailbox.name !== undefined) return error(at.email, 'give the bare address, without a name');
    email = mailbox.address;
  } catch (invalid) {
    return error(at.email, (invalid as Error).message);
  }
  const name = (index: number | undefined, field: string): string | null | RowError => {
    const value = cell(index);
    if (value === '') return null;
    if (value.length > NAME_MAX) return error(index!, `${field}: at most ${NAME_MAX} characters`);
    return value;
  };
  const first = name(at.first_name, 'first_name');
  if (first !== null && typeof first === 'object') return first;
  const last = name(at.last_name, 'last_name');
  if (last !== null && typeof last === 'object') return last;
  let unsubscribed: boolean | null = null;
  const flag = cell(at.unsubscribed).toLowerCase();
  if (flag !== '') {
    if (TRUE.has(flag)) unsubscribed = true;
    else if (FALSE.has(flag)) unsubscribed = false;
    else return error(at.unsubscribed!, `unsubscribed: ${JSON.stringify(flag)} is not true or false (nor yes/no, 1/0)`);
  }
  const properties: Record<string, PropertyValue> = {};
  for (const property of at.properties) {
    const value = cell(property.index);
    if (value === '') continue;
    if (property.type === 'number') {
      const number = Number(value);
      if (!Number.isFinite(number)) {
        return error(property.index, `properties.${property.key}: ${JSON.stringify(value)} is not a number`);
      }
      properties[property.key] = number;
    } else {
      if (value.length > PROPERTY_STRING_MAX) {
        return error(property.index, `properties.${property.key}: at most ${PROPERTY_STRING_MAX} characters`);
      }
      properties[property.key] = value;
    }
  }
  return { row: record.row, email, first_name: first, last_name: last, unsubscribed, properties };
}
