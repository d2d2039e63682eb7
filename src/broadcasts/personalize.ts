// A broadcast's content made for one contact: Resend's triple-brace placeholders replaced by the
// contact's values, once per copy (a broadcast to 100,000 contacts runs this 100,000 times for its
// HTML and as many for its text), in one pass of one regular expression over the content.
//
// The placeholders (spaces inside the braces are allowed):
//   {{{contact.first_name}}}  {{{FIRST_NAME}}}   the contact's first name
//   {{{contact.last_name}}}   {{{LAST_NAME}}}    the contact's last name
//   {{{contact.email}}}       {{{EMAIL}}}        the contact's address
//   {{{contact.<key>}}}                          the contact's value of the property <key> (its fallback
//                                                when the contact has none: ContactFields.properties)
//   {{{RESEND_UNSUBSCRIBE_URL}}}                 the copy's one-click unsubscribe link
// Any of them may end in `|fallback`, written where the value is empty or missing: {{{FIRST_NAME|there}}}.
// Without one, an empty or missing value is written as nothing.
//
// In HTML a value is escaped (& < > " ' as character references), so a contact's name can never add
// markup; the fallback is written as it stands, since it is part of the content its author wrote. A
// placeholder that names nothing above (a misspelt {{{FRIST_NAME}}}, even with a fallback; {{{contact.x}}}
// when the organization has no property x and no fallback is given) is left exactly as written, so the
// mistake shows in the copy and in a test send rather than vanishing.

/** What a copy's placeholders may name about its contact. */
export interface ContactFields {
  email: string;
  first_name: string | null;
  last_name: string | null;
  /** The contact's property values, with each property's fallback where the contact has none. */
  properties: Record<string, string | number>;
}

// {{{ name }}} or {{{ name | fallback }}}: a name is letters, digits, _ . - ; a fallback anything but braces.
const PLACEHOLDER = /\{\{\{\s*([A-Za-z0-9_.-]+)\s*(?:\|([^{}]*))?\}\}\}/g;

const UPPER: Record<string, 'first_name' | 'last_name' | 'email'> = {
  FIRST_NAME: 'first_name',
  LAST_NAME: 'last_name',
  EMAIL: 'email',
};
const CONTACT_PREFIX = 'contact.';

/**
 * Replaces the triple-brace placeholders of `content` ({{{contact.first_name|there}}},
 * {{{FIRST_NAME|there}}}, {{{contact.<property>}}}, {{{RESEND_UNSUBSCRIBE_URL}}}); values are HTML-escaped
 * when `html` is true.
 */
export function personalizeContent(
  content: string,
  contact: ContactFields,
  unsubscribeUrl: string,
  html: boolean,
): string {
  // Most content has no placeholder at all: no regular expression run then.
  if (!content.includes('{{{')) return content;
  return content.replace(PLACEHOLDER, (whole: string, name: string, fallback: string | undefined) => {
    const value = valueOf(name, contact, unsubscribeUrl);
    if (value === UNKNOWN || (value === MISSING && fallback === undefined)) return whole; // left as written
    if (value === MISSING || value === '') return fallback === undefined ? '' : fallback.trim();
    return html ? escapeHtml(value) : value;
  });
}

/** A name that is none of the placeholders: never replaced, even with a fallback. */
const UNKNOWN = Symbol('unknown');
/** contact.<key> where the organization has no property <key>: its fallback, else left as written. */
const MISSING = Symbol('missing');

/** The value a placeholder names ('' when known but empty). */
function valueOf(
  name: string,
  contact: ContactFields,
  unsubscribeUrl: string,
): string | typeof UNKNOWN | typeof MISSING {
  if (name === 'RESEND_UNSUBSCRIBE_URL') return unsubscribeUrl;
  const upper = UPPER[name];
  if (upper !== undefined) return contact[upper] ?? '';
  if (!name.startsWith(CONTACT_PREFIX)) return UNKNOWN;
  const key = name.slice(CONTACT_PREFIX.length);
  if (key === 'first_name' || key === 'last_name' || key === 'email') return contact[key] ?? '';
  if (key === '' || !Object.hasOwn(contact.properties, key)) return MISSING;
  const property = contact.properties[key];
  return property === undefined || property === null ? '' : String(property);
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(text: string): string {
  return /[&<>"']/.test(text) ? text.replace(/[&<>"']/g, (char) => ESCAPES[char]!) : text;
}
