import { ApiError, errorMessage } from '../api.ts';
import { Button } from './Button.tsx';

interface ErrorBannerProps {
  error: unknown;
  /** What failed, e.g. "The emails could not be loaded". */
  title?: string;
  /** Fields shown by their own Field: an error about one of them is left to that field. */
  exceptFields?: string[];
  onRetry?: () => void;
}

/** An error in words, announced to screen readers; nothing when there is no error. */
export function ErrorBanner({ error, title, exceptFields = [], onRetry }: ErrorBannerProps) {
  if (error === undefined || error === null) return null;
  if (error instanceof ApiError && error.field !== undefined) {
    const field = error.field;
    if (exceptFields.some((name) => field === name || field.startsWith(`${name}.`))) return null;
  }
  return (
    <div className="error-banner" role="alert">
      {title ? <p className="error-banner-title">{title}</p> : null}
      <p>{errorMessage(error)}</p>
      {onRetry ? (
        <Button variant="secondary" onClick={onRetry}>
          Try again
        </Button>
      ) : null}
    </div>
  );
}
