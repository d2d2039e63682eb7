import { Component, Suspense, type ReactNode } from 'react';
import { Button } from './Button.tsx';
import { Loading } from './Loading.tsx';

interface State {
  failed: boolean;
}

/**
 * Where a page's code arrives: "Loading…" while its file is fetched (each page is a file of its own, fetched
 * when first opened), and an error in words, with a way out, when it cannot be: the network is gone, or
 * Mailroom was upgraded since this tab opened and the old file is no longer served. Keyed by the address, so
 * other pages still open; the page that failed needs the reload its button offers (a failed import is
 * remembered until then).
 */
export class PageBoundary extends Component<{ children: ReactNode }, State> {
  override state: State = { failed: false };

  static getDerivedStateFromError(): State {
    return { failed: true };
  }

  override render() {
    if (this.state.failed) {
      return (
        <div className="error-banner" role="alert">
          <p className="error-banner-title">This page could not be loaded</p>
          <p>Mailroom may have been upgraded since this tab was opened, or the connection dropped.</p>
          <Button variant="secondary" onClick={() => window.location.reload()}>
            Reload the dashboard
          </Button>
        </div>
      );
    }
    return <Suspense fallback={<Loading label="Opening the page…" />}>{this.props.children}</Suspense>;
  }
}
