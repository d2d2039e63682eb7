import { Button } from './Button.tsx';

/** A list page's filter form's buttons: apply, and clear once any filter is applied. */
export function FilterActions({ filtered, onClear }: { filtered: boolean; onClear: () => void }) {
  return (
    <div className="button-row filters-actions">
      <Button type="submit" variant="primary">
        Apply filters
      </Button>
      {filtered ? (
        <Button variant="quiet" onClick={onClear}>
          Clear filters
        </Button>
      ) : null}
    </div>
  );
}
