import { useMemo } from 'react';
import type { ListResponse } from '../../api.ts';
import { useApiGet } from '../../hooks.ts';
import type { KnownNames } from './words.tsx';

/**
 * The organization's template and segment names by id, for steps whose config names them by id. While
 * they load, or when they cannot be read, steps show the ids.
 */
export function useKnownNames(): KnownNames {
  const templates = useApiGet<ListResponse<{ id: string; name: string }>>('/templates');
  const segments = useApiGet<ListResponse<{ id: string; name: string }>>('/segments');
  return useMemo(
    () => ({
      templates: new Map((templates.data?.data ?? []).map((item) => [item.id, item.name])),
      segments: new Map((segments.data?.data ?? []).map((item) => [item.id, item.name])),
    }),
    [templates.data, segments.data],
  );
}
