import { useId } from 'react';
import { Button } from './Button.tsx';
import { CopyButton } from './CopyButton.tsx';

interface SecretOnceProps {
  /** What the secret is: "API key", "Signing secret". */
  label: string;
  secret: string;
  /** Called when the person says they have stored it; the caller then forgets the secret. */
  onDone: () => void;
}

/**
 * A secret Mailroom shows only once (a new API key, a webhook signing secret): in a read-only field to
 * select, with a copy button and a warning that it cannot be shown again.
 */
export function SecretOnce({ label, secret, onDone }: SecretOnceProps) {
  const id = useId();
  return (
    <section className="secret-once" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Your new {label}</h2>
      <p className="secret-once-warning" id={`${id}-warning`}>
        Copy it now and keep it somewhere safe: this is the only time Mailroom shows it. If you lose it, create a new
        one.
      </p>
      <div className="secret-once-value">
        <label htmlFor={`${id}-value`} className="visually-hidden">
          {label}
        </label>
        <input
          id={`${id}-value`}
          className="monospace"
          readOnly
          value={secret}
          aria-describedby={`${id}-warning`}
          onFocus={(event) => event.target.select()}
          spellCheck={false}
        />
        <CopyButton value={secret} label={`Copy ${label}`} />
      </div>
      <Button variant="primary" onClick={onDone}>
        I have stored it
      </Button>
    </section>
  );
}
