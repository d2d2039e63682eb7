// The signed-in session: its bearer token lives in memory and in sessionStorage (so a reload keeps it,
// closing the tab ends it). It never goes into a URL, a log line or localStorage.
import { useSyncExternalStore } from 'react';

export interface Session {
  token: string;
  email: string;
  expiresAt: string;
}

const STORAGE_KEY = 'mailroom.session';
/** Why the session ended, kept like the session so that a reload of the sign-in page still says it. */
const NOTICE_KEY = 'mailroom.notice';

let current: Session | null = readStored();
/** A message for the sign-in page, e.g. why the session ended. */
let notice: string | null = readStoredNotice();
const listeners = new Set<() => void>();

function readStored(): Session | null {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    if (!raw) return null;
    const value = JSON.parse(raw) as Partial<Session>;
    if (typeof value.token !== 'string' || typeof value.email !== 'string' || typeof value.expiresAt !== 'string') {
      return null;
    }
    if (Date.parse(value.expiresAt) <= Date.now()) return null;
    return { token: value.token, email: value.email, expiresAt: value.expiresAt };
  } catch {
    return null; // storage disabled or corrupt: the person signs in again
  }
}

function readStoredNotice(): string | null {
  try {
    return sessionStorage.getItem(NOTICE_KEY);
  } catch {
    return null;
  }
}

function storeNotice(message: string | null): void {
  try {
    if (message === null) sessionStorage.removeItem(NOTICE_KEY);
    else sessionStorage.setItem(NOTICE_KEY, message);
  } catch {
    // Without storage the notice lasts until the page is reloaded.
  }
}

function emit() {
  for (const listener of listeners) listener();
}

export function getSession(): Session | null {
  return current;
}

export function startSession(session: Session): void {
  current = session;
  notice = null;
  storeNotice(null);
  try {
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
  } catch {
    // Without storage the session lasts until the page is reloaded.
  }
  emit();
}

/** Ends the session in this tab; `message` is shown on the sign-in page. */
export function endSession(message: string | null = null): void {
  current = null;
  notice = message;
  storeNotice(message);
  try {
    sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // nothing stored
  }
  emit();
}

export function takeNotice(): string | null {
  return notice;
}

function subscribe(listener: () => void) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The current session, re-rendering when it starts or ends. */
export function useSession(): Session | null {
  return useSyncExternalStore(subscribe, getSession);
}
