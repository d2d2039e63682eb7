import { useEffect, useState } from 'react';
import { Button } from './Button.tsx';

/** Copies text with the Clipboard API, or by selecting it in a hidden field where that API is missing (plain http). */
export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // refused (permissions): fall back below
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'offscreen';
  document.body.append(area);
  area.select();
  let copied = false;
  try {
    copied = document.execCommand('copy');
  } catch {
    copied = false;
  }
  area.remove();
  return copied;
}

interface CopyButtonProps {
  value: string;
  /** The button's accessible name, e.g. "Copy API key" (default "Copy"). */
  label?: string;
}

/** A button that copies `value` and says whether it worked, in a live region. */
export function CopyButton({ value, label = 'Copy' }: CopyButtonProps) {
  const [result, setResult] = useState<'copied' | 'failed' | null>(null);
  useEffect(() => {
    if (result !== 'copied') return;
    const timer = setTimeout(() => setResult(null), 4000);
    return () => clearTimeout(timer);
  }, [result]);
  return (
    <span className="copy-button">
      <Button variant="secondary" onClick={async () => setResult((await copyText(value)) ? 'copied' : 'failed')}>
        {label}
      </Button>
      <span role="status" className="copy-status">
        {result === 'copied'
          ? 'Copied'
          : result === 'failed'
            ? 'Could not copy: select the text and copy it yourself'
            : ''}
      </span>
    </span>
  );
}
