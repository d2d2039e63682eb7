import type { ReactNode } from 'react';

/** One label and its value in a details list (`<dl className="details">`). */
export function DetailRow({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div className="detail-row">
      <dt>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}
