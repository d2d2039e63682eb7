import type { ButtonHTMLAttributes, ReactNode } from 'react';

export type ButtonVariant = 'primary' | 'secondary' | 'danger' | 'quiet';

interface ButtonProps extends ButtonHTMLAttributes<HTMLButtonElement> {
  variant?: ButtonVariant;
  /** Work is under way: the button is disabled, says so, and shows `busyLabel` (default: its label). */
  busy?: boolean;
  busyLabel?: ReactNode;
  children: ReactNode;
}

/** A button whose text is its accessible name; `type` defaults to "button" (pass "submit" in forms). */
export function Button({
  variant = 'secondary',
  busy = false,
  busyLabel,
  children,
  className,
  disabled,
  type,
  ...rest
}: ButtonProps) {
  return (
    <button
      type={type ?? 'button'}
      className={`button button-${variant}${className ? ` ${className}` : ''}`}
      disabled={disabled || busy}
      aria-busy={busy || undefined}
      {...rest}
    >
      {busy ? <span className="spinner" aria-hidden="true" /> : null}
      {busy && busyLabel ? busyLabel : children}
    </button>
  );
}
