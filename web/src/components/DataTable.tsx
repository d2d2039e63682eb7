import type { ReactNode } from 'react';

export interface Column<T> {
  /** The column's header text. */
  header: string;
  cell: (row: T) => ReactNode;
  /** e.g. "numeric" (right-aligned), "nowrap", "hide-narrow" (hidden at phone width). */
  className?: string;
}

interface DataTableProps<T> {
  /** Says what the table lists; read by screen readers, shown unless `captionHidden`. */
  caption: string;
  captionHidden?: boolean;
  columns: Array<Column<T>>;
  rows: T[];
  rowKey: (row: T) => string;
}

/**
 * A semantic table (caption, column headers with scope) inside a region that scrolls sideways on narrow
 * screens and can be scrolled with the keyboard. Show an EmptyState instead when `rows` is empty.
 */
export function DataTable<T>({ caption, captionHidden = false, columns, rows, rowKey }: DataTableProps<T>) {
  return (
    <div className="table-scroll" role="region" aria-label={caption} tabIndex={0}>
      <table className="data-table">
        <caption className={captionHidden ? 'visually-hidden' : undefined}>{caption}</caption>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column.header} scope="col" className={column.className}>
                {column.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((column) => (
                <td key={column.header} className={column.className} data-label={column.header}>
                  {column.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
