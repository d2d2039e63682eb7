import { useEffect, useId, useRef, useState, type ReactNode } from 'react';
import { api } from '../api.ts';
import { endSession, useSession } from '../session.ts';
import { Link, navigate, useLocation } from '../router.tsx';
import { NAVIGATION, SIGN_IN_PATH, type Route } from '../routes.tsx';
import { Button } from './Button.tsx';
import { SearchBox } from './SearchBox.tsx';
import { useApiGet } from '../hooks.ts';

/**
 * The frame of every signed-in page: a skip link, the header with the search box, the signed-in person and Sign out, the
 * navigation in groups (a menu button at phone width) and the page in <main>. When the address changes, the new
 * page's h1 takes the focus.
 */
export function Layout({ activeNav, children }: { activeNav: string | undefined; children: ReactNode }) {
  const session = useSession();
  const location = useLocation();
  const [menuOpen, setMenuOpen] = useState(false);
  const [signingOut, setSigningOut] = useState(false);
  const navId = useId();
  const mainRef = useRef<HTMLElement>(null);
  // Also checks the session on every load: an expired one is sent to sign-in at once (see api.ts).
  const organization = useApiGet<{ name: string }>('/organization');

  useEffect(() => {
    setMenuOpen(false);
    const main = mainRef.current;
    if (!main) return;
    const focusTitle = () => {
      const title = main.querySelector<HTMLElement>('h1');
      // Unless the person is typing meanwhile (in the search box, say).
      const active = document.activeElement;
      const typing =
        active instanceof HTMLElement && (active.isContentEditable || active.matches('input, textarea, select'));
      if (title && (!typing || main.contains(active))) title.focus();
      return title !== null;
    };
    if (focusTitle()) return;
    // The page's code is still on its way: its title takes the focus when it arrives.
    const observer = new MutationObserver(() => focusTitle() && observer.disconnect());
    observer.observe(main, { childList: true, subtree: true });
    return () => observer.disconnect();
  }, [location.path]);

  const navLink = (route: Route) => (
    <li key={route.path}>
      <Link
        to={route.path}
        aria-current={route.path === activeNav ? 'page' : undefined}
        // Chosen, the menu closes, even when it is the page already open.
        onClick={() => setMenuOpen(false)}
      >
        {route.nav}
      </Link>
    </li>
  );

  async function signOut() {
    setSigningOut(true);
    try {
      await api.post('/auth/logout');
    } catch {
      // The session ends in this tab whatever the server said (it may have expired already).
    }
    endSession('You have signed out.');
    navigate(SIGN_IN_PATH, { replace: true });
  }

  return (
    <div className="app">
      <a className="skip-link" href="#main" onClick={(event) => (event.preventDefault(), mainRef.current?.focus())}>
        Skip to content
      </a>
      <header className="app-header">
        <Link to="/" className="brand">
          Mailroom
        </Link>
        {organization.data ? <span className="organization-name">{organization.data.name}</span> : null}
        <SearchBox />
        <Button
          variant="quiet"
          className="menu-button"
          aria-expanded={menuOpen}
          aria-controls={navId}
          onClick={() => setMenuOpen((open) => !open)}
        >
          {menuOpen ? 'Close menu' : 'Menu'}
        </Button>
        <div className="account">
          <span className="account-email" title="Signed in as">
            {session?.email}
          </span>
          <Button variant="quiet" busy={signingOut} busyLabel="Signing out…" onClick={signOut}>
            Sign out
          </Button>
        </div>
      </header>
      <div className="app-body">
        <nav id={navId} className={`app-nav${menuOpen ? ' open' : ''}`} aria-label="Main">
          {NAVIGATION.map((entry) =>
            entry.kind === 'page' ? (
              <ul key={entry.route.path}>{navLink(entry.route)}</ul>
            ) : (
              // A group folds away (a phone's menu is shorter); all start open, so every page is one
              // click away on a desk and two taps (Menu, then the page) on a phone.
              <details key={entry.name} className="nav-group" open>
                <summary>{entry.name}</summary>
                <ul>{entry.routes.map(navLink)}</ul>
              </details>
            ),
          )}
        </nav>
        <main id="main" ref={mainRef} tabIndex={-1}>
          {children}
        </main>
      </div>
    </div>
  );
}
