// The shared kit every page builds with.
export { Button } from './Button.tsx';
export { CheckboxField, Field, SelectField, TextAreaField } from './Field.tsx';
export { ConfirmButton } from './ConfirmButton.tsx';
export { CopyButton, copyText } from './CopyButton.tsx';
export { DataTable, type Column } from './DataTable.tsx';
export { DetailRow } from './DetailRow.tsx';
export { EmptyState } from './EmptyState.tsx';
export { HtmlPreview, webUrl } from './HtmlPreview.tsx';
export { ErrorBanner } from './ErrorBanner.tsx';
export { FilterActions } from './FilterActions.tsx';
export { Loading } from './Loading.tsx';
export { PageHeader } from './PageHeader.tsx';
export { Pager } from './Pager.tsx';
export { SecretOnce } from './SecretOnce.tsx';
export { StatusBadge } from './StatusBadge.tsx';
export { RelativeTime, Timestamp, formatRelative, formatTimestamp } from './Time.tsx';
