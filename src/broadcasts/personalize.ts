// SEAM STUB (to be written): a broadcast's content made for one contact.

/** What a copy's placeholders may name about its contact. */
export interface ContactFields {
  email: string;
  first_name: string | null;
  last_name: string | null;
  /** The contact's property values, with each property's fallback where the contact has none. */
  properties: Record<string, string | number>;
}

/**
 * Replaces the triple-brace placeholders of `content` ({{{contact.first_name|there}}},
 * {{{FIRST_NAME|there}}}, {{{contact.<property>}}}, {{{RESEND_UNSUBSCRIBE_URL}}}); values are HTML-escaped
 * when `html` is true.
 */
export function personalizeContent(
  content: string,
  _contact: ContactFields,
  _unsubscribeUrl: string,
  _html: boolean,
): string {
  return content;
}
