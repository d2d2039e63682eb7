import type { ReactNode } from 'react';
import { Button } from './Button.tsx';

/**
 * A page's primary action in its header, on the right, when the form that does it sits lower on the page:
 * brings the form into view and puts the focus in its first field.
 */
export function JumpToForm({ formId, children }: { formId: string; children: ReactNode }) {
  return (
    <Button
      variant="primary"
      onClick={() => {
        const form = document.getElementById(formId);
        form?.scrollIntoView({ block: 'center' });
        form?.querySelector<HTMLElement>('input, select, textarea')?.focus();
      }}
    >
      {children}
    </Button>
  );
}
