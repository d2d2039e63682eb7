import type { ReactNode } from 'react';

/**
 * A state shown as a badge: `tone` picks its colour (`.status-<tone>` in styles.css: verified, enabled,
 * succeeded and delivered read green, failed and bounced red, pending and scheduled amber …), the
 * children say it in words.
 */
export function StatusBadge({ tone, children }: { tone: string; children: ReactNode }) {
  return <span className={`status-badge status-${tone}`}>{children}</span>;
}
