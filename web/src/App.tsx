import { useEffect } from 'react';
import { useSession } from './session.ts';
import { matchPath, navigate, useLocation } from './router.tsx';
import { ROUTES, SIGN_IN_PATH } from './routes.tsx';
import { Layout } from './components/Layout.tsx';
import { PageBoundary } from './components/PageBoundary.tsx';
import { SignInPage } from './pages/SignInPage.tsx';
import { NotFoundPage } from './pages/NotFoundPage.tsx';

/** Signed out: the sign-in page (which returns to the address asked for). Signed in: the page of the address. */
export function App() {
  const session = useSession();
  const location = useLocation();
  const onSignIn = location.path === SIGN_IN_PATH;

  useEffect(() => {
    if (session && onSignIn) {
      // After signing in, back to where the person was going.
      const next = location.query.get('next');
      navigate(next && next.startsWith('/') && !next.startsWith(SIGN_IN_PATH) ? next : '/', { replace: true });
    } else if (!session && !onSignIn) {
      const next = location.href === '/' ? '' : `?next=${encodeURIComponent(location.href)}`;
      navigate(`${SIGN_IN_PATH}${next}`, { replace: true });
    }
  }, [session, onSignIn, location]);

  if (!session) return onSignIn ? <SignInPage /> : null;
  if (onSignIn) return null;

  for (const route of ROUTES) {
    const params = matchPath(route.path, location.path);
    if (!params) continue;
    const Page = route.page;
    return (
      <Layout activeNav={route.nav ? route.path : route.section}>
        <PageBoundary key={location.path}>
          <Page params={params} query={location.query} />
        </PageBoundary>
      </Layout>
    );
  }
  return (
    <Layout activeNav={undefined}>
      <NotFoundPage />
    </Layout>
  );
}
