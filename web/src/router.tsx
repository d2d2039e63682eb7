// A small hash router: a page's address is the URL's fragment (`#/emails/3f…?status=sent`), so the
// server only ever serves `/` and no dashboard address can collide with an API path. Fragments never
// leave the browser (not in requests, not in Referer headers), and neither do the filters in them.
import { useSyncExternalStore, type AnchorHTMLAttributes, type ReactNode } from 'react';

/** What the router hands a page. */
export interface PageProps {
  /** The `:name` parts of the route's path. */
  params: Record<string, string>;
  /** The query of the address (`#/emails?status=sent`): filters that survive a reload and can be shared. */
  query: URLSearchParams;
}

export interface Location {
  /** `/emails/3f…` (always starts with `/`) */
  path: string;
  query: URLSearchParams;
  /** The fragment without `#`, the key of this location. */
  href: string;
}

function readHash(): string {
  const hash = window.location.hash.replace(/^#/, '');
  return hash.startsWith('/') ? hash : `/${hash}`;
}

let cachedHref = '';
let cached: Location = { path: '/', query: new URLSearchParams(), href: '/' };

export function currentLocation(): Location {
  const href = readHash();
  if (href !== cachedHref) {
    const [path = '/', search = ''] = href.split('?', 2) as [string?, string?];
    let decodedPath = path;
    try {
      decodedPath = decodeURI(path);
    } catch {
      // a malformed escape stays as typed; no route will match it
    }
    cachedHref = href;
    cached = { path: decodedPath.replace(/(.)\/+$/, '$1'), query: new URLSearchParams(search), href };
  }
  return cached;
}

function subscribe(listener: () => void) {
  window.addEventListener('hashchange', listener);
  return () => window.removeEventListener('hashchange', listener);
}

/** The current location; the component re-renders when it changes. */
export function useLocation(): Location {
  return useSyncExternalStore(subscribe, currentLocation);
}

/** `#/…` for a dashboard address. */
export const href = (to: string) => `#${to.startsWith('/') ? to : `/${to}`}`;

/** Goes to a dashboard address (`/emails?status=sent`); `replace` leaves no history entry behind. */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const target = href(to);
  if (options.replace) {
    window.history.replaceState(null, '', target);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    window.location.hash = target;
  }
}

/** A path pattern's parameters: `/emails/:id` against `/emails/42` → `{ id: '42' }`; null when it does not match. */
export function matchPath(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/').filter(Boolean);
  const have = path.split('/').filter(Boolean);
  if (want.length !== have.length) return null;
  const params: Record<string, string> = {};
  for (const [index, part] of want.entries()) {
    const actual = have[index]!;
    if (part.startsWith(':')) params[part.slice(1)] = actual;
    else if (part !== actual) return null;
  }
  return params;
}

interface LinkProps extends Omit<AnchorHTMLAttributes<HTMLAnchorElement>, 'href'> {
  /** A dashboard address: `/emails/42` */
  to: string;
  children: ReactNode;
}

/** A link to a dashboard page: a real `<a href="#/…">`, so it opens in a new tab and is keyboard reachable. */
export function Link({ to, children, ...rest }: LinkProps) {
  return (
    <a href={href(to)} {...rest}>
      {children}
    </a>
  );
}
