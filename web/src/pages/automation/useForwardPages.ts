import { useEffect, useState } from 'react';
import type { Query } from '../../api.ts';
import { useApiGet, type Loaded } from '../../hooks.ts';
import type { ListResponse } from '../../api.ts';

// A list route paged forward only (`limit`, `after`, `has_more`: the automation, run and event lists),
// shown with the Pager: Older follows `after` the last item, Newer goes back to the page before it,
// whose cursor this hook kept.

export interface ForwardPages<T> extends Loaded<ListResponse<T>> {
  items: T[];
  hasNext: boolean;
  hasPrevious: boolean;
  next: () => void;
  previous: () => void;
}

export function useForwardPages<T extends { id: string }>(
  path: string | null,
  query: Query = {},
  limit = 20,
): ForwardPages<T> {
  // The `after` of each page from the first (undefined) to the one shown.
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  const queryKey = JSON.stringify(query);
  useEffect(() => setCursors([undefined]), [queryKey, path]);
  const after = cursors.at(-1);
  const loaded = useApiGet<ListResponse<T>>(path, { ...query, limit, after });
  const items = loaded.data?.data ?? [];
  return {
    ...loaded,
    items,
    hasNext: (loaded.data?.has_more ?? false) && items.length > 0,
    hasPrevious: cursors.length > 1,
    next: () => {
      const last = items.at(-1);
      if (last) setCursors((previous) => [...previous, last.id]);
    },
    previous: () => setCursors((previous) => (previous.length > 1 ? previous.slice(0, -1) : previous)),
  };
}
