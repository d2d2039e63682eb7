import { useEffect, useId, useRef, useState, type KeyboardEvent } from 'react';
import { api, errorMessage } from '../api.ts';
import { navigate } from '../router.tsx';

/** A result of GET /search. */
export interface SearchResult {
  object: 'email' | 'contact' | 'domain' | 'template' | 'broadcast' | 'webhook' | 'api_key';
  id: string;
  title: string;
  detail: string;
  created_at: string;
}

const KINDS: Record<SearchResult['object'], { label: string; address: (id: string) => string }> = {
  email: { label: 'Emails', address: (id) => `/emails/${encodeURIComponent(id)}` },
  contact: { label: 'Contacts', address: (id) => `/contacts/${encodeURIComponent(id)}` },
  domain: { label: 'Domains', address: (id) => `/domains/${encodeURIComponent(id)}` },
  template: { label: 'Templates', address: (id) => `/templates/${encodeURIComponent(id)}` },
  broadcast: { label: 'Broadcasts', address: (id) => `/broadcasts/${encodeURIComponent(id)}` },
  webhook: { label: 'Webhooks', address: (id) => `/webhooks/${encodeURIComponent(id)}` },
  api_key: { label: 'API keys', address: () => '/api-keys' },
};

/** One choice of the list: a result, or the Emails list's own search (which reads every message). */
interface Choice {
  key: string;
  address: string;
  result?: SearchResult;
}

/** Waits this long after the last key before asking, so typing a word costs one request, not one a letter. */
const TYPING_PAUSE_MS = 150;

/** Whether a key press is someone typing text (where `/` is a character, not the shortcut). */
function isTyping(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName);
}

/**
 * The header's search: `/` or Ctrl-K (⌘-K on a Mac) jumps to it, typing shows what matches across the
 * organization (a combobox: arrows move, Enter opens, Escape closes), and the last choice always searches
 * every email from the Emails list.
 */
export function SearchBox() {
  const [text, setText] = useState('');
  const [open, setOpen] = useState(false);
  const [results, setResults] = useState<SearchResult[] | undefined>(undefined);
  const [searching, setSearching] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [active, setActive] = useState(0);
  const inputRef = useRef<HTMLInputElement>(null);
  const listId = useId();
  const hintId = useId();
  const query = text.trim();

  // `/` and Ctrl/⌘-K from anywhere on the page.
  useEffect(() => {
    function onKey(event: globalThis.KeyboardEvent) {
      const shortcut = (event.key === 'k' || event.key === 'K') && (event.ctrlKey || event.metaKey);
      const slash = event.key === '/' && !event.ctrlKey && !event.metaKey && !event.altKey && !isTyping(event.target);
      if (!shortcut && !slash) return;
      event.preventDefault();
      inputRef.current?.focus();
      inputRef.current?.select();
    }
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);

  useEffect(() => {
    setActive(0);
    // Never a result of the previous text: Enter now must not open what matched before.
    setResults(undefined);
    if (query === '') {
      setResults(undefined);
      setSearching(false);
      setError(undefined);
      return;
    }
    const controller = new AbortController();
    setSearching(true);
    const timer = setTimeout(() => {
      api
        .get<{ data: SearchResult[] }>('/search', { q: query }, controller.signal)
        .then((found) => {
          setResults(found.data);
          setError(undefined);
          setSearching(false);
        })
        .catch((failure: unknown) => {
          if (controller.signal.aborted) return;
          setError(failure);
          setSearching(false);
        });
    }, TYPING_PAUSE_MS);
    return () => {
      clearTimeout(timer);
      controller.abort();
    };
  }, [query]);

  const choices: Choice[] = [
    ...(results ?? []).map((result) => ({
      key: `${result.object}:${result.id}`,
      address: KINDS[result.object].address(result.id),
      result,
    })),
    ...(query ? [{ key: 'all-emails', address: `/emails?search=${encodeURIComponent(query)}` }] : []),
  ];
  const showList = open && query !== '';
  const optionId = (index: number) => `${listId}-option-${index}`;

  function choose(choice: Choice | undefined) {
    if (!choice) return;
    navigate(choice.address);
    setOpen(false);
    setText('');
    inputRef.current?.blur();
  }

  function onKeyDown(event: KeyboardEvent<HTMLInputElement>) {
    if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      event.preventDefault();
      setOpen(true);
      if (choices.length === 0) return;
      const step = event.key === 'ArrowDown' ? 1 : -1;
      setActive((index) => (index + step + choices.length) % choices.length);
    } else if (event.key === 'Enter') {
      // Nothing shown to choose, or an input method still composing the text.
      if (!showList || event.nativeEvent.isComposing) return;
      event.preventDefault();
      choose(choices[Math.min(active, choices.length - 1)]);
    } else if (event.key === 'Escape') {
      // First Escape closes the list, the second clears the box (a search field would clear at once).
      event.preventDefault();
      if (showList) setOpen(false);
      else setText('');
    }
  }

  // Results in their kinds' groups, numbered in the order the arrows walk them.
  const groups: Array<{ kind: SearchResult['object']; items: Array<{ choice: Choice; index: number }> }> = [];
  choices.forEach((choice, index) => {
    if (!choice.result) return;
    const last = groups.at(-1);
    if (last?.kind === choice.result.object) last.items.push({ choice, index });
    else groups.push({ kind: choice.result.object, items: [{ choice, index }] });
  });
  const allEmailsIndex = choices.length - 1;

  let status = '';
  if (showList) {
    if (searching) status = 'Searching…';
    else if (error) status = `The search failed: ${errorMessage(error)}`;
    else if (results) status = results.length === 0 ? `Nothing found for “${query}”` : `${results.length} found`;
  }

  return (
    <div className="search-box" role="search">
      <input
        ref={inputRef}
        type="search"
        className="search-input"
        role="combobox"
        aria-label="Search Mailroom"
        aria-describedby={hintId}
        aria-keyshortcuts="/ Control+K Meta+K"
        aria-expanded={showList}
        aria-controls={listId}
        aria-autocomplete="list"
        aria-activedescendant={showList && choices.length > 0 ? optionId(active) : undefined}
        placeholder="Search  ( / )"
        autoComplete="off"
        spellCheck={false}
        value={text}
        onChange={(event) => {
          setText(event.target.value);
          setOpen(true);
        }}
        onFocus={() => setOpen(true)}
        // Later than a click on a result, which would otherwise find the list gone.
        onBlur={() => setTimeout(() => setOpen(false), 150)}
        onKeyDown={onKeyDown}
      />
      <span id={hintId} className="visually-hidden">
        Finds emails, contacts, domains, templates, broadcasts, webhook endpoints and API keys. Shortcut: slash or
        Control K.
      </span>
      <div className={`search-results${showList ? ' open' : ''}`}>
        <p className="search-status" role="status">
          {status}
        </p>
        <ul id={listId} role="listbox" aria-label="Search results" hidden={!showList}>
          {groups.map((group) => (
            <li key={group.kind} role="presentation">
              <ul role="group" aria-label={KINDS[group.kind].label}>
                <li role="presentation" className="search-group" aria-hidden="true">
                  {KINDS[group.kind].label}
                </li>
                {group.items.map(({ choice, index }) => (
                  <li
                    key={choice.key}
                    id={optionId(index)}
                    role="option"
                    aria-selected={index === active}
                    className="search-option"
                    onMouseDown={(event) => event.preventDefault()}
                    onClick={() => choose(choice)}
                    onMouseEnter={() => setActive(index)}
                  >
                    <span className="search-title">{choice.result!.title || '(no subject)'}</span>
                    {choice.result!.detail ? <span className="search-detail">{choice.result!.detail}</span> : null}
                  </li>
                ))}
              </ul>
            </li>
          ))}
          {query ? (
            <li
              id={optionId(allEmailsIndex)}
              role="option"
              aria-selected={active === allEmailsIndex}
              className="search-option search-all"
              onMouseDown={(event) => event.preventDefault()}
              onClick={() => choose(choices[allEmailsIndex])}
              onMouseEnter={() => setActive(allEmailsIndex)}
            >
              Search every email for “{query}”
            </li>
          ) : null}
        </ul>
      </div>
    </div>
  );
}
