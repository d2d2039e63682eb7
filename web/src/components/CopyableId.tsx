import { CopyButton } from './CopyButton.tsx';

/** An id as the API takes it, copied in one click: `of` names its owner for the button ("Copy the id of Newsletter"). */
export function CopyableId({ id, of }: { id: string; of: string }) {
  return (
    <span className="copyable-id">
      <code className="break-anywhere">{id}</code>
      <CopyButton value={id} label={`Copy the id of ${of}`} />
    </span>
  );
}
