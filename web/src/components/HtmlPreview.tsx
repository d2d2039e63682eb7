import { useState } from 'react';
import { useApiGet } from '../hooks.ts';
import { Button } from './Button.tsx';
import { ErrorBanner } from './ErrorBanner.tsx';
import { Loading } from './Loading.tsx';

/** Only web links become an href or a frame's src (never `javascript:` or `data:`). */
export function webUrl(value: string | null | undefined): string | undefined {
  if (!value) return undefined;
  try {
    const url = new URL(value, window.location.href);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}

/** The path and query of a link, to load from this origin; undefined for anything but http(s). */
function sameOriginPath(value: string | null | undefined): string | undefined {
  const url = webUrl(value);
  if (url === undefined) return undefined;
  const { pathname, search } = new URL(url);
  return `${pathname}${search}`;
}

interface Preview {
  html_url: string | null;
  expires_at: string;
}

/**
 * A message's HTML in a sandboxed frame, loaded from the signed link `previewPath` answers (the message's
 * own Content-Security-Policy: no script, nothing remote until the viewer asks, its inline styles kept).
 * `previewPath` is null when the message has no HTML.
 */
export function HtmlPreview({ previewPath, title }: { previewPath: string | null; title: string }) {
  const preview = useApiGet<Preview>(previewPath);
  const [remote, setRemote] = useState(false);
  // Framed from the dashboard's own origin whatever host the link names (frame-src 'self'): the preview
  // route is served by this same process.
  const htmlUrl = sameOriginPath(preview.data?.html_url);
  const frameUrl = htmlUrl && remote ? `${htmlUrl}${htmlUrl.includes('?') ? '&' : '?'}remote_content=1` : htmlUrl;
  return (
    <>
      <ErrorBanner error={preview.error} title="The HTML preview could not be loaded" onRetry={preview.reload} />
      {previewPath !== null && !preview.data && preview.loading ? <Loading label="Loading the preview…" /> : null}
      {frameUrl ? (
        <>
          <div className="button-row preview-actions">
            {remote ? (
              <span className="muted">Remote images and styles are loaded.</span>
            ) : (
              <>
                <span className="muted">Remote images are blocked: loading them tells the sender you looked.</span>
                <Button variant="secondary" onClick={() => setRemote(true)}>
                  Load remote content
                </Button>
              </>
            )}
          </div>
          <iframe
            key={frameUrl}
            className="preview-frame"
            sandbox=""
            referrerPolicy="no-referrer"
            src={frameUrl}
            title={title}
          />
        </>
      ) : null}
    </>
  );
}
