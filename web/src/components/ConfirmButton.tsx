import { useEffect, useRef, useState, type ReactNode } from 'react';
import { errorMessage } from '../api.ts';
import { Button, type ButtonVariant } from './Button.tsx';

interface ConfirmButtonProps {
  /** The button's label: "Delete domain". */
  children: ReactNode;
  /** The question asked before doing it: "Delete example.com? Mail from it will stop." */
  question: ReactNode;
  /** The confirming button's label (default: the same as `children`). */
  confirmLabel?: ReactNode;
  busyLabel?: ReactNode;
  variant?: ButtonVariant;
  /** The work; a rejection is shown next to the buttons in words. */
  onConfirm: () => Promise<unknown>;
}

/** A destructive or irreversible action asked twice, inline (no browser dialog), with progress and its error. */
export function ConfirmButton({
  children,
  question,
  confirmLabel,
  busyLabel,
  variant = 'danger',
  onConfirm,
}: ConfirmButtonProps) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const confirmRef = useRef<HTMLDivElement>(null);
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );
  useEffect(() => {
    if (asking) confirmRef.current?.querySelector<HTMLButtonElement>('button')?.focus();
  }, [asking]);

  if (!asking) {
    return (
      <Button variant={variant} onClick={() => setAsking(true)}>
        {children}
      </Button>
    );
  }
  return (
    <div className="confirm" role="group" aria-label="Confirm" ref={confirmRef}>
      <p className="confirm-question">{question}</p>
      <div className="button-row">
        <Button
          variant={variant}
          busy={busy}
          busyLabel={busyLabel}
          onClick={async () => {
            setBusy(true);
            setError(undefined);
            try {
              await onConfirm();
              if (mounted.current) setAsking(false);
            } catch (caught) {
              if (mounted.current) setError(caught);
            } finally {
              if (mounted.current) setBusy(false);
            }
          }}
        >
          {confirmLabel ?? children}
        </Button>
        <Button variant="quiet" disabled={busy} onClick={() => (setAsking(false), setError(undefined))}>
          Cancel
        </Button>
      </div>
      {error !== undefined ? (
        <p className="field-error" role="alert">
          {errorMessage(error)}
        </p>
      ) : null}
    </div>
  );
}
