import { Button } from './Button.tsx';

interface PagerProps {
  /** What is paged, for the navigation's name: "Emails". */
  label: string;
  hasPrevious: boolean;
  hasNext: boolean;
  onPrevious: () => void;
  onNext: () => void;
  busy?: boolean;
}

/** Newer / older pages of a list paged by keys (see useKeysetList). Hidden when there is only one page. */
export function Pager({ label, hasPrevious, hasNext, onPrevious, onNext, busy = false }: PagerProps) {
  if (!hasPrevious && !hasNext) return null;
  return (
    <nav className="pager" aria-label={`${label} pages`}>
      <Button onClick={onPrevious} disabled={!hasPrevious || busy}>
        ← Newer
      </Button>
      <Button onClick={onNext} disabled={!hasNext || busy}>
        Older →
      </Button>
    </nav>
  );
}
