import type { ReactNode } from 'react';

interface EmptyStateProps {
  /** What is empty: "No emails yet". */
  title: string;
  /** What to do next, in words: "Send one with POST /emails or from the Templates page." */
  children: ReactNode;
  /** A button or link that does the next step. */
  action?: ReactNode;
}

/** An empty list says so and says what to do next. */
export function EmptyState({ title, children, action }: EmptyStateProps) {
  return (
    <div className="empty-state">
      <p className="empty-state-title">{title}</p>
      <div className="empty-state-next">{children}</div>
      {action ? <div className="empty-state-action">{action}</div> : null}
    </div>
  );
}
