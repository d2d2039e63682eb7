import { PageHeader } from '../components/index.ts';
import { Link } from '../router.tsx';

export function NotFoundPage() {
  return (
    <>
      <PageHeader title="Page not found" description="The dashboard has no page at this address." />
      <p>
        <Link to="/">Go to the overview</Link>, or pick a page from the menu.
      </p>
    </>
  );
}
