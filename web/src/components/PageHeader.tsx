import type { ReactNode } from 'react';
import { useDocumentTitle } from '../hooks.ts';

interface PageHeaderProps {
  /** The page's h1 and the browser tab's title. */
  title: string;
  /** One line saying what the page is for. */
  description?: ReactNode;
  /** Buttons or links for the page's main actions. */
  actions?: ReactNode;
}

/**
 * The top of every page. Its h1 takes the focus when the page opens (tabIndex -1), so screen reader and
 * keyboard users start at the new page's title.
 */
export function PageHeader({ title, description, actions }: PageHeaderProps) {
  useDocumentTitle(title);
  return (
    <header className="page-header">
      <div>
        <h1 tabIndex={-1} className="page-title">
          {title}
        </h1>
        {description ? <p className="page-description">{description}</p> : null}
      </div>
      {actions ? <div className="page-actions">{actions}</div> : null}
    </header>
  );
}
