// Just enough of HTML's tokenizer (HTML § 13.2.5) to know where tags, attribute values and comments
// are, read the way a browser reads them rather than with regular expressions: quoted attribute values
// may hold `>` or `<a`, comments and raw-text elements such as <style> hide markup, and hostile input
// must not make the scan slower than linear. It reports what it finds and changes nothing.

export interface Attribute {
  name: string;
  /** The raw value (without quotes); undefined for an attribute without `=`. */
  value?: string;
  /** The span of the value in the document, quotes included. */
  start: number;
  end: number;
}

export interface StartTag {
  /** Lower-cased. */
  name: string;
  attributes: Attribute[];
  /** The index after the tag's `>`. */
  end: number;
}

export interface HtmlVisitor {
  startTag(tag: StartTag): void;
  /**
   * An end tag (name lower-cased) that begins at `at`, not inside a comment, attribute or raw-text
   * element. `inConditionalComment`: it is inside `<!--[if …]>…<![endif]-->`, which Outlook renders
   * but which is not part of the document for anyone else.
   */
  endTag(name: string, at: number, inConditionalComment: boolean): void;
}

const LT = 0x3c;
const GT = 0x3e;
const SLASH = 0x2f;
const EQUALS = 0x3d;
const QUOTE = 0x22;
const APOSTROPHE = 0x27;
const BANG = 0x21;
const QUESTION = 0x3f;

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d;
const isAsciiAlpha = (c: number) => (c | 0x20) >= 0x61 && (c | 0x20) <= 0x7a;
const isAsciiAlphanumeric = (c: number) => isAsciiAlpha(c) || (c >= 0x30 && c <= 0x39);
export const asciiLower = (s: string) => s.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());

/** Elements whose content is text up to their end tag: a `<a` inside them is not a tag. */
const RAW_TEXT_ELEMENTS = new Set(['script', 'style', 'textarea', 'title', 'xmp', 'iframe', 'noembed', 'noframes']);

/** Index of `char` in html[from, to), or -1. (indexOf would look past `to`.) */
function findChar(html: string, char: number, from: number, to: number): number {
  for (let i = from; i < to; i++) if (html.charCodeAt(i) === char) return i;
  return -1;
}

/**
 * Walks the whole document. Stops at a tag or comment that does not end: a browser would take the rest
 * of the document into it, so nothing after it is markup. The inside of a conditional comment
 * (`<!--[if mso]>…<![endif]-->`) is walked too, its tags reported with `inConditionalComment`.
 */
export function scanHtml(html: string, visit: HtmlVisitor): void {
  scanRange(html, 0, html.length, false, visit);
}

/** Walks html[from, to); see scanHtml. */
function scanRange(html: string, from: number, to: number, inComment: boolean, visit: HtmlVisitor): void {
  let i = from;
  while (i < to) {
    const lt = findChar(html, LT, i, to);
    if (lt === -1 || lt + 1 >= to) return;
    const next = html.charCodeAt(lt + 1);

    if (isAsciiAlpha(next)) {
      const tag = readTag(html, lt + 1, to);
      if (!tag) return;
      visit.startTag(tag);
      i = tag.end;
      if (RAW_TEXT_ELEMENTS.has(tag.name)) {
        const close = findEndTag(html, tag.name, i, to);
        if (close === -1) return;
        i = close;
      }
    } else if (next === SLASH && lt + 2 < to && isAsciiAlpha(html.charCodeAt(lt + 2))) {
      const tag = readTag(html, lt + 2, to);
      if (!tag) return;
      visit.endTag(tag.name, lt, inComment);
      i = tag.end;
    } else if (lt + 4 <= to && html.startsWith('<!--', lt)) {
      const contentStart = lt + 4;
      // `<!-->` and `<!--->` are complete (empty) comments.
      const emptyEnd = html.startsWith('>', contentStart)
        ? contentStart + 1
        : html.startsWith('->', contentStart)
          ? contentStart + 2
          : -1;
      if (emptyEnd !== -1) {
        if (emptyEnd > to) return;
        i = emptyEnd;
        continue;
      }
      // Inside a conditional range the comment cannot run past `to`: the range itself ends at a `-->`.
      const close = html.indexOf('-->', contentStart);
      if (close === -1 || close + 3 > to) return;
      if (/^\[if\b/i.test(html.slice(contentStart, contentStart + 4))) {
        scanRange(html, contentStart, close, true, visit);
      }
      i = close + 3;
    } else if (next === BANG || next === QUESTION) {
      // <!DOCTYPE …>, <![CDATA[…]]>, <![endif]>, <?…>: up to the next `>`.
      const gt = findChar(html, GT, lt + 2, to);
      if (gt === -1) return;
      i = gt + 1;
    } else {
      i = lt + 1; // a `<` that starts nothing is text
    }
  }
}

/** Where `</name` (followed by a space, `/` or `>`) first occurs in html[from, to), or -1. */
function findEndTag(html: string, name: string, from: number, to: number): number {
  for (let lt = findChar(html, LT, from, to); lt !== -1; lt = findChar(html, LT, lt + 1, to)) {
    const end = lt + 2 + name.length;
    if (end >= to) return -1;
    if (html.charCodeAt(lt + 1) !== SLASH) continue;
    if (asciiLower(html.slice(lt + 2, end)) !== name) continue;
    const after = html.charCodeAt(end);
    if (isSpace(after) || after === SLASH || after === GT) return lt;
  }
  return -1;
}

/**
 * Reads a tag from its name (at `nameStart`) to its `>`: its lower-case name, its attributes, and the
 * index after the `>`; null when it does not end before `to`.
 */
function readTag(html: string, nameStart: number, to: number): StartTag | null {
  let i = nameStart;
  while (i < to && !isTagNameEnd(html.charCodeAt(i))) i++;
  const name = asciiLower(html.slice(nameStart, i));
  const attributes: Attribute[] = [];
  while (i < to) {
    const c = html.charCodeAt(i);
    if (isSpace(c) || c === SLASH) {
      i++;
      continue;
    }
    if (c === GT) return { name, attributes, end: i + 1 };

    // An attribute name runs to a space, `/`, `>` or `=` (a leading `=` belongs to the name).
    const attributeStart = i;
    i++;
    while (i < to && !isTagNameEnd(html.charCodeAt(i)) && html.charCodeAt(i) !== EQUALS) i++;
    const attributeName = html.slice(attributeStart, i);
    while (i < to && isSpace(html.charCodeAt(i))) i++;
    if (i >= to || html.charCodeAt(i) !== EQUALS) {
      attributes.push({ name: attributeName, start: i, end: i });
      continue;
    }
    i++;
    while (i < to && isSpace(html.charCodeAt(i))) i++;
    if (i >= to) return null;
    const quote = html.charCodeAt(i);
    if (quote === QUOTE || quote === APOSTROPHE) {
      const close = findChar(html, quote, i + 1, to);
      if (close === -1) return null;
      attributes.push({ name: attributeName, value: html.slice(i + 1, close), start: i, end: close + 1 });
      i = close + 1;
    } else {
      const valueStart = i;
      while (i < to && !isSpace(html.charCodeAt(i)) && html.charCodeAt(i) !== GT) i++;
      attributes.push({ name: attributeName, value: html.slice(valueStart, i), start: valueStart, end: i });
    }
  }
  return null;
}

const isTagNameEnd = (c: number) => isSpace(c) || c === SLASH || c === GT;

// ---------------------------------------------------------------------------------------------------
// Character references in attribute values (HTML § 13.2.5.72–80), for reading a value exactly.

/**
 * Named references whose value matters in a URL: the legacy ones (which a browser also accepts without
 * the `;`) and ASCII punctuation. A value using any other named reference cannot be read exactly here.
 */
// prettier-ignore
const LEGACY_REFERENCES: Record<string, number> = {
  AElig: 198, AMP: 38, Aacute: 193, Acirc: 194, Agrave: 192, Aring: 197, Atilde: 195, Auml: 196, COPY: 169,
  Ccedil: 199, ETH: 208, Eacute: 201, Ecirc: 202, Egrave: 200, Euml: 203, GT: 62, Iacute: 205, Icirc: 206,
  Igrave: 204, Iuml: 207, LT: 60, Ntilde: 209, Oacute: 211, Ocirc: 212, Ograve: 210, Oslash: 216, Otilde: 213,
  Ouml: 214, QUOT: 34, REG: 174, THORN: 222, Uacute: 218, Ucirc: 219, Ugrave: 217, Uuml: 220, Yacute: 221,
  aacute: 225, acirc: 226, acute: 180, aelig: 230, agrave: 224, amp: 38, aring: 229, atilde: 227, auml: 228,
  brvbar: 166, ccedil: 231, cedil: 184, cent: 162, copy: 169, curren: 164, deg: 176, divide: 247, eacute: 233,
  ecirc: 234, egrave: 232, eth: 240, euml: 235, frac12: 189, frac14: 188, frac34: 190, gt: 62, iacute: 237,
  icirc: 238, iexcl: 161, igrave: 236, iquest: 191, iuml: 239, laquo: 171, lt: 60, macr: 175, micro: 181,
  middot: 183, nbsp: 160, not: 172, ntilde: 241, oacute: 243, ocirc: 244, ograve: 242, ordf: 170, ordm: 186,
  oslash: 248, otilde: 245, ouml: 246, para: 182, plusmn: 177, pound: 163, quot: 34, raquo: 187, reg: 174,
  sect: 167, shy: 173, sup1: 185, sup2: 178, sup3: 179, szlig: 223, thorn: 254, times: 215, uacute: 250,
  ucirc: 251, ugrave: 249, uml: 168, uuml: 252, yacute: 253, yen: 165, yuml: 255,
};
/** Valid only with the `;`. */
// prettier-ignore
const SEMICOLON_REFERENCES: Record<string, number> = {
  ...LEGACY_REFERENCES,
  Tab: 9, NewLine: 10, excl: 33, num: 35, dollar: 36, percnt: 37, apos: 39, lpar: 40, rpar: 41, ast: 42,
  midast: 42, plus: 43, comma: 44, period: 46, sol: 47, colon: 58, semi: 59, equals: 61, quest: 63, commat: 64,
  lsqb: 91, lbrack: 91, bsol: 92, rsqb: 93, rbrack: 93, Hat: 94, lowbar: 95, UnderBar: 95, grave: 96,
  DiacriticalGrave: 96, lcub: 123, lbrace: 123, verbar: 124, vert: 124, VerticalLine: 124, rcub: 125,
  rbrace: 125,
};
/** Numeric references to C1 controls mean Windows-1252 characters (HTML § 13.2.5.80). */
// prettier-ignore
const WINDOWS_1252: Record<number, number> = {
  0x80: 0x20ac, 0x82: 0x201a, 0x83: 0x0192, 0x84: 0x201e, 0x85: 0x2026, 0x86: 0x2020, 0x87: 0x2021,
  0x88: 0x02c6, 0x89: 0x2030, 0x8a: 0x0160, 0x8b: 0x2039, 0x8c: 0x0152, 0x8e: 0x017d, 0x91: 0x2018,
  0x92: 0x2019, 0x93: 0x201c, 0x94: 0x201d, 0x95: 0x2022, 0x96: 0x2013, 0x97: 0x2014, 0x98: 0x02dc,
  0x99: 0x2122, 0x9a: 0x0161, 0x9b: 0x203a, 0x9c: 0x0153, 0x9e: 0x017e, 0x9f: 0x0178,
};
const has = (table: Record<string, number>, name: string) => Object.hasOwn(table, name);

/**
 * An attribute's raw value as a browser reads it; null when it uses a named reference not known here
 * (a caller that needs the exact value must then leave the attribute alone).
 */
export function decodeAttributeValue(raw: string): string | null {
  if (!raw.includes('&')) return raw;
  let out = '';
  let i = 0;
  for (let amp = raw.indexOf('&'); amp !== -1; amp = raw.indexOf('&', i)) {
    out += raw.slice(i, amp);
    const reference = readReference(raw, amp + 1);
    if (reference === null) return null;
    if (reference === undefined) {
      out += '&';
      i = amp + 1;
    } else {
      out += reference.text;
      i = reference.end;
    }
  }
  return out + raw.slice(i);
}

/** The reference after an `&` at `start`: its text and end; undefined when it is a literal `&`; null when unknown. */
function readReference(raw: string, start: number): { text: string; end: number } | undefined | null {
  if (raw.charCodeAt(start) === 0x23 /* # */) return readNumericReference(raw, start + 1);
  let end = start;
  while (end < raw.length && isAsciiAlphanumeric(raw.charCodeAt(end))) end++;
  if (end === start) return undefined;
  const name = raw.slice(start, end);
  if (raw.charCodeAt(end) === 0x3b /* ; */) {
    return has(SEMICOLON_REFERENCES, name)
      ? { text: String.fromCodePoint(SEMICOLON_REFERENCES[name]!), end: end + 1 }
      : null;
  }
  // Without `;`, only a legacy name, and (in an attribute) not when `=` follows: `?a=1&copy=2` stays.
  if (has(LEGACY_REFERENCES, name) && raw.charCodeAt(end) !== EQUALS) {
    return { text: String.fromCodePoint(LEGACY_REFERENCES[name]!), end };
  }
  // A legacy name followed by letters or digits is literal in an attribute (`&notice`): any other name
  // is literal too, unless it is a reference this table lacks (which would need the `;`).
  return undefined;
}

function readNumericReference(raw: string, start: number): { text: string; end: number } | undefined {
  const hex = (raw.charCodeAt(start) | 0x20) === 0x78; /* x */
  let i = hex ? start + 1 : start;
  const digitsStart = i;
  let code = 0;
  for (; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    const digit =
      c >= 0x30 && c <= 0x39 ? c - 0x30 : hex && (c | 0x20) >= 0x61 && (c | 0x20) <= 0x66 ? (c | 0x20) - 0x57 : -1;
    if (digit === -1) break;
    code = Math.min(code * (hex ? 16 : 10) + digit, 0x110000); // capped: stays out of range, never overflows
  }
  if (i === digitsStart) return undefined; // `&#` with no digits is literal
  const end = raw.charCodeAt(i) === 0x3b /* ; */ ? i + 1 : i;
  if (code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return { text: '\uFFFD', end };
  return { text: String.fromCodePoint(WINDOWS_1252[code] ?? code), end };
}
