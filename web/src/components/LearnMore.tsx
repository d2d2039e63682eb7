interface LearnMoreProps {
  /** The guide's page: `webhooks` for docs/webhooks.md. */
  page: string;
  /** A heading's anchor on that page: `verifying-signatures`. */
  section?: string;
  /** What it tells about, for screen readers ("Learn more about webhook signatures"). */
  about: string;
}

/**
 * A link to this version's guide (docs/*.md, served by Mailroom at /guide/<page>), opened in a new tab so
 * the page stays as it was: the explanation a page would otherwise carry above its table.
 */
export function LearnMore({ page, section, about }: LearnMoreProps) {
  return (
    <a className="learn-more" href={`/guide/${page}${section ? `#${section}` : ''}`} target="_blank" rel="noopener">
      Learn more<span className="visually-hidden"> about {about} (opens in a new tab)</span>
    </a>
  );
}
