import {
  useId,
  type InputHTMLAttributes,
  type ReactNode,
  type SelectHTMLAttributes,
  type TextareaHTMLAttributes,
} from 'react';

// Form fields: a visible label, an optional hint, and the error for this field as text right under it.
// The input points at both with aria-describedby and says aria-invalid when there is an error.

interface Common {
  label: ReactNode;
  /** A short help text under the label. */
  hint?: ReactNode;
  /** The error message for this field (e.g. `fieldError(action.error, 'name')`). */
  error?: string | undefined;
}

function useDescribed(hint: ReactNode, error: string | undefined) {
  const id = useId();
  const hintId = hint ? `${id}-hint` : undefined;
  const errorId = error ? `${id}-error` : undefined;
  return {
    id,
    hintId,
    errorId,
    describedBy: [hintId, errorId].filter(Boolean).join(' ') || undefined,
  };
}

function Parts({
  hint,
  hintId,
  error,
  errorId,
}: {
  hint: ReactNode;
  hintId?: string;
  error?: string;
  errorId?: string;
}) {
  return (
    <>
      {hint ? (
        <p className="field-hint" id={hintId}>
          {hint}
        </p>
      ) : null}
      {error ? (
        <p className="field-error" id={errorId}>
          {error}
        </p>
      ) : null}
    </>
  );
}

type InputProps = Common &
  Omit<InputHTMLAttributes<HTMLInputElement>, 'onChange' | 'value'> & {
    value: string;
    onChange: (value: string) => void;
  };

/** A labelled text input (type text, email, password, url, number, datetime-local…). */
export function Field({ label, hint, error, value, onChange, className, ...input }: InputProps) {
  const { id, hintId, errorId, describedBy } = useDescribed(hint, error);
  return (
    <div className={`field${className ? ` ${className}` : ''}`}>
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        value={value}
        onChange={(event) => onChange(event.target.value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy}
        {...input}
      />
      <Parts hint={hint} hintId={hintId} error={error} errorId={errorId} />
    </div>
  );
}

type TextAreaProps = Common &
  Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, 'onChange' | 'value'> & {
    value: string;
    onChange: (value: string) => void;
  };

/** A labelled multi-line text field. */
export function TextAreaField({ label, hint, error, value, onChange, className, ...textarea }: TextAreaProps) {
  const { id, hintId, errorId, describedBy } = useDescribed(hint, error);
  return (
    <div className={`field${className ? ` ${className}` : ''}`}>
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        value={value}
        onChange={(event) => onChange(event.target.value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy}
        {...textarea}
      />
      <Parts hint={hint} hintId={hintId} error={error} errorId={errorId} />
    </div>
  );
}

type SelectProps = Common &
  Omit<SelectHTMLAttributes<HTMLSelectElement>, 'onChange' | 'value'> & {
    value: string;
    onChange: (value: string) => void;
    options: Array<{ value: string; label: string }>;
  };

/** A labelled drop-down. */
export function SelectField({ label, hint, error, value, onChange, options, className, ...select }: SelectProps) {
  const { id, hintId, errorId, describedBy } = useDescribed(hint, error);
  return (
    <div className={`field${className ? ` ${className}` : ''}`}>
      <label htmlFor={id}>{label}</label>
      <select
        id={id}
        value={value}
        onChange={(event) => onChange(event.target.value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy}
        {...select}
      >
        {options.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </select>
      <Parts hint={hint} hintId={hintId} error={error} errorId={errorId} />
    </div>
  );
}

type CheckboxProps = Common &
  Omit<InputHTMLAttributes<HTMLInputElement>, 'onChange' | 'checked' | 'type'> & {
    checked: boolean;
    onChange: (checked: boolean) => void;
  };

/** A labelled checkbox (the label follows the box). */
export function CheckboxField({ label, hint, error, checked, onChange, className, ...input }: CheckboxProps) {
  const { id, hintId, errorId, describedBy } = useDescribed(hint, error);
  return (
    <div className={`field field-checkbox${className ? ` ${className}` : ''}`}>
      <input
        id={id}
        type="checkbox"
        checked={checked}
        onChange={(event) => onChange(event.target.checked)}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy}
        {...input}
      />
      <label htmlFor={id}>{label}</label>
      <Parts hint={hint} hintId={hintId} error={error} errorId={errorId} />
    </div>
  );
}
