// Loading and changing data from a page: every request goes through api.ts, and every hook here keeps
// the state a page needs to show progress and errors in words.
import { useCallback, useEffect, useRef, useState } from 'react';
import { api, type ListResponse, type Query } from './api.ts';

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  /** Fetches again (after a change, or from a "Try again" button). */
  reload: () => void;
}

/**
 * GETs `path` (with `query`) when the page shows and whenever either changes; a newer request cancels
 * the older one. `path` null waits (e.g. until an id is known).
 */
export function useApiGet<T>(path: string | null, query?: Query): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: path !== null,
  });
  const [generation, setGeneration] = useState(0);
  const queryKey = JSON.stringify(query ?? {});

  useEffect(() => {
    if (path === null) return;
    const controller = new AbortController();
    setState((previous) => ({ ...previous, loading: true, error: undefined }));
    api
      .get<T>(path, JSON.parse(queryKey) as Query, controller.signal)
      .then((data) => setState({ data, error: undefined, loading: false }))
      .catch((error: unknown) => {
        if (controller.signal.aborted) return;
        setState((previous) => ({ data: previous.data, error, loading: false }));
      });
    return () => controller.abort();
  }, [path, queryKey, generation]);

  const reload = useCallback(() => setGeneration((n) => n + 1), []);
  return { ...state, reload };
}

export interface Action<A extends unknown[], R> {
  /** Runs the action; resolves with its result, or undefined when it failed (the error is in `error`). */
  run: (...args: A) => Promise<R | undefined>;
  busy: boolean;
  error: unknown;
  clearError: () => void;
}

/** A change (POST, PATCH, DELETE…) with its progress and its error, for a Button's `busy` and an ErrorBanner. */
export function useAction<A extends unknown[], R>(action: (...args: A) => Promise<R>): Action<A, R> {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const latest = useRef(action);
  latest.current = action;
  const run = useCallback(async (...args: A) => {
    setBusy(true);
    setError(undefined);
    try {
      return await latest.current(...args);
    } catch (caught) {
      setError(caught);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  const clearError = useCallback(() => setError(undefined), []);
  return { run, busy, error, clearError };
}

export interface KeysetList<T> extends Loaded<ListResponse<T>> {
  items: T[];
  hasNext: boolean;
  hasPrevious: boolean;
  next: () => void;
  previous: () => void;
  /** Back to the newest page (e.g. after a filter changed). */
  first: () => void;
}

/**
 * A list route paged by keys (`limit`, `after`, `before`, `has_more`; newest first on every page), as
 * the Pager component shows it. `query` holds the filters; changing it goes back to the first page.
 */
export function useKeysetList<T extends { id: string }>(path: string, query: Query = {}, limit = 20): KeysetList<T> {
  const [cursor, setCursor] = useState<{ after?: string; before?: string }>({});
  const queryKey = JSON.stringify(query);
  useEffect(() => setCursor({}), [queryKey]);
  const loaded = useApiGet<ListResponse<T>>(path, { ...query, limit, ...cursor });
  const items = loaded.data?.data ?? [];
  const hasMore = loaded.data?.has_more ?? false;
  // Going back (before) the API says whether newer pages remain; going forward, whether older ones do.
  const hasNext = cursor.before !== undefined ? true : hasMore;
  const hasPrevious = cursor.before !== undefined ? hasMore : cursor.after !== undefined;
  return {
    ...loaded,
    items,
    hasNext: hasNext && items.length > 0,
    hasPrevious,
    next: () => {
      const last = items.at(-1);
      if (last) setCursor({ after: last.id });
    },
    previous: () => {
      const first = items[0];
      setCursor(first ? { before: first.id } : {});
    },
    first: () => setCursor({}),
  };
}

/** Sets the browser tab's title while the page shows. */
export function useDocumentTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Mailroom`;
  }, [title]);
}
