import { isIP } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import yauzl from 'yauzl';
import type { StoredReport } from '../domains/dmarc.ts';

// DMARC aggregate reports (RFC 7489 appendix C) as Google, Microsoft and Yahoo mail them: an XML file,
// gzip-compressed (`.xml.gz`), zipped (`.zip`) or plain, attached to a message sent to the domain's
// `rua` address. Reports are read defensively: the compressed file, the XML it expands to, the records
// and every value are bounded, a zip's declared sizes are checked against what it really inflates to,
// and a report that breaks any rule is refused whole (DmarcReportError), never half-read.

/** Largest attachment taken (compressed). Real reports are kilobytes; a big sender's, a few megabytes. */
export const MAX_COMPRESSED_BYTES = 5 * 1024 * 1024;
/** Largest XML a report may expand to: more is a zip bomb, or not a report. */
export const MAX_XML_BYTES = 20 * 1024 * 1024;
/** Records in one report at most. */
const MAX_RECORDS = 100_000;
const MAX_ZIP_ENTRIES = 10;
const MAX_TEXT = 255;
/** The longest time one report covers. */
const MAX_RANGE_MS = 31 * 86_400_000;

export class DmarcReportError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DmarcReportError';
  }
}

/** A report as read: what src/domains/dmarc.ts stores. */
export type DmarcReport = StoredReport;
export type DmarcRecord = StoredReport['records'][number];

export interface Attachment {
  contentType: string;
  filename?: string | undefined;
  content: Buffer;
}

/** Whether an attachment looks like a report file (by type, name or first bytes). */
export function isReportFile(attachment: Attachment): boolean {
  return kindOf(attachment) !== undefined;
}

function kindOf({ contentType, filename, content }: Attachment): 'gzip' | 'zip' | 'xml' | undefined {
  const type = contentType.toLowerCase();
  const name = (filename ?? '').toLowerCase();
  if (content[0] === 0x1f && content[1] === 0x8b) return 'gzip';
  if (content.subarray(0, 4).equals(Buffer.from([0x50, 0x4b, 0x03, 0x04]))) return 'zip';
  if (/gzip/.test(type) || name.endsWith('.gz')) return 'gzip';
  if (/zip/.test(type) || name.endsWith('.zip')) return 'zip';
  if (/xml/.test(type) || name.endsWith('.xml')) return 'xml';
  return undefined;
}

/** The report in an attachment; DmarcReportError when it is not a valid report within the limits. */
export async function readDmarcReport(attachment: Attachment): Promise<DmarcReport> {
  if (attachment.content.length > MAX_COMPRESSED_BYTES) {
    throw new DmarcReportError(`the report file is over ${MAX_COMPRESSED_BYTES} bytes`);
  }
  const kind = kindOf(attachment);
  if (kind === undefined) throw new DmarcReportError('not a report file (XML, gzip or zip)');
  const xml =
    kind === 'gzip'
      ? gunzip(attachment.content)
      : kind === 'zip'
        ? await unzipFirstXml(attachment.content)
        : attachment.content;
  if (xml.length > MAX_XML_BYTES) throw new DmarcReportError(`the report is over ${MAX_XML_BYTES} bytes of XML`);
  return parseReportXml(xml.toString('utf8'));
}

function gunzip(content: Buffer): Buffer {
  try {
    return gunzipSync(content, { maxOutputLength: MAX_XML_BYTES });
  } catch (error) {
    if (error instanceof RangeError || (error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new DmarcReportError(`the gzip file expands to more than ${MAX_XML_BYTES} bytes`);
    }
    throw new DmarcReportError(`not a valid gzip file (${(error as Error).message})`);
  }
}

/** The zip's XML entry, read no further than its declared size and the limit (yauzl checks the two agree). */
function unzipFirstXml(content: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const fail = (message: string) => reject(new DmarcReportError(message));
    yauzl.fromBuffer(content, { lazyEntries: true, validateEntrySizes: true }, (openError, zip) => {
      if (openError || !zip) return fail(`not a valid zip file (${openError?.message ?? 'empty'})`);
      let entries = 0;
      zip.on('error', (error: Error) => fail(`not a valid zip file (${error.message})`));
      zip.on('end', () => fail('the zip file holds no XML file'));
      zip.on('entry', (entry: yauzl.Entry) => {
        if (++entries > MAX_ZIP_ENTRIES) return fail(`the zip file holds over ${MAX_ZIP_ENTRIES} files`);
        if (entry.fileName.endsWith('/') || !entry.fileName.toLowerCase().endsWith('.xml')) return zip.readEntry();
        if (entry.uncompressedSize > MAX_XML_BYTES) {
          return fail(`the zip file's ${entry.fileName} expands to more than ${MAX_XML_BYTES} bytes`);
        }
        zip.openReadStream(entry, (streamError, stream) => {
          if (streamError || !stream) return fail(`the zip file's ${entry.fileName} cannot be read`);
          const chunks: Buffer[] = [];
          let size = 0;
          stream.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_XML_BYTES) {
              stream.destroy();
              return fail(`the zip file's ${entry.fileName} expands to more than ${MAX_XML_BYTES} bytes`);
            }
            chunks.push(chunk);
          });
          // A declared size that the data does not match is an error here (validateEntrySizes).
          stream.on('error', (error: Error) => fail(`the zip file's ${entry.fileName} is damaged (${error.message})`));
          stream.on('end', () => {
            zip.close();
            resolve(Buffer.concat(chunks));
          });
        });
      });
      zip.readEntry();
    });
  });
}

const parser = new XMLParser({
  ignoreAttributes: true,
  // No entity of any kind is expanded: a report has none, and expansion is how XML bombs work.
  processEntities: false,
  parseTagValue: false,
  trimValues: true,
  // Only these repeat: policy_evaluated has its own <dkim> and <spf>, which must stay single values.
  isArray: (_name, jpath) =>
    jpath === 'feedback.record' ||
    jpath === 'feedback.record.auth_results.dkim' ||
    jpath === 'feedback.record.auth_results.spf',
});

type Node = Record<string, unknown>;

/** A report's XML, checked: well-formed, the fields DMARC defines, every value within bounds. */
export function parseReportXml(xml: string): DmarcReport {
  const valid = XMLValidator.validate(xml);
  if (valid !== true) throw new DmarcReportError(`not well-formed XML (${valid.err.msg}, line ${valid.err.line})`);
  if (/<!ENTITY/i.test(xml)) throw new DmarcReportError('the XML declares entities');
  let root: Node;
  try {
    root = parser.parse(xml) as Node;
  } catch (error) {
    throw new DmarcReportError(`not a report's XML (${(error as Error).message})`);
  }
  const feedback = node(root.feedback, 'feedback');
  const metadata = node(feedback.report_metadata, 'report_metadata');
  const range = node(metadata.date_range, 'report_metadata.date_range');
  const published = node(feedback.policy_published, 'policy_published');
  const records = (feedback.record as unknown[] | undefined) ?? [];
  if (records.length > MAX_RECORDS) throw new DmarcReportError(`over ${MAX_RECORDS} records`);
  const domain = text(published.domain, 'policy_published.domain').toLowerCase().replace(/\.$/, '');
  const begin = epoch(range.begin, 'report_metadata.date_range.begin');
  const end = epoch(range.end, 'report_metadata.date_range.end');
  // A report covers a day, sometimes a few, that has passed: anything else is not one (and a far-future
  // end would never be pruned).
  if (end < begin || end.getTime() - begin.getTime() > MAX_RANGE_MS || end.getTime() > Date.now() + 86_400_000) {
    throw new DmarcReportError('report_metadata.date_range: not a range of past days (at most 31)');
  }
  return {
    reporter: text(metadata.org_name, 'report_metadata.org_name'),
    reporterEmail: optionalText(metadata.email),
    reportId: text(metadata.report_id, 'report_metadata.report_id'),
    begin,
    end,
    domain,
    policy: optionalText(published.p),
    records: records.map((value, at) => record(node(value, `record[${at}]`), `record[${at}]`)),
  };
}

function record(value: Node, path: string): DmarcRecord {
  const row = node(value.row, `${path}.row`);
  const evaluated = node(row.policy_evaluated, `${path}.row.policy_evaluated`);
  const identifiers = value.identifiers === undefined ? {} : node(value.identifiers, `${path}.identifiers`);
  const auth = value.auth_results === undefined ? {} : node(value.auth_results, `${path}.auth_results`);
  const sourceIp = text(row.source_ip, `${path}.row.source_ip`);
  if (isIP(sourceIp) === 0) throw new DmarcReportError(`${path}.row.source_ip: not an IP address`);
  const messages = Number(text(row.count, `${path}.row.count`));
  if (!Number.isSafeInteger(messages) || messages < 0 || messages > 1e9) {
    throw new DmarcReportError(`${path}.row.count: not a count`);
  }
  const dkimResults = ((auth.dkim as unknown[] | undefined) ?? []).map((d, at) =>
    node(d, `${path}.auth_results.dkim[${at}]`),
  );
  const spfResults = ((auth.spf as unknown[] | undefined) ?? []).map((d, at) =>
    node(d, `${path}.auth_results.spf[${at}]`),
  );
  return {
    sourceIp,
    messages,
    dkimAligned: optionalText(evaluated.dkim) === 'pass',
    spfAligned: optionalText(evaluated.spf) === 'pass',
    disposition: optionalText(evaluated.disposition),
    headerFrom: domainOf(identifiers.header_from),
    envelopeFrom: domainOf(identifiers.envelope_from),
    dkimDomains: dkimResults
      .filter((d) => optionalText(d.result) === 'pass')
      .map((d) => domainOf(d.domain))
      .filter((d): d is string => d !== null),
    spfDomain: domainOf(spfResults[0]?.domain),
  };
}

/** A domain as reports write it, in lower case without the trailing dot. */
function domainOf(value: unknown): string | null {
  return optionalText(value)?.toLowerCase().replace(/\.$/, '') ?? null;
}

function node(value: unknown, path: string): Node {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new DmarcReportError(`${path}: missing`);
  }
  return value as Node;
}

function text(value: unknown, path: string): string {
  const found = optionalText(value);
  if (found === null) throw new DmarcReportError(`${path}: missing`);
  return found;
}

function optionalText(value: unknown): string | null {
  if (typeof value !== 'string' && typeof value !== 'number') return null;
  const found = String(value).trim();
  return found === '' ? null : found.slice(0, MAX_TEXT);
}

function epoch(value: unknown, path: string): Date {
  const seconds = Number(text(value, path));
  if (!Number.isSafeInteger(seconds) || seconds < 0 || seconds > 32_503_680_000) {
    throw new DmarcReportError(`${path}: not a time (seconds since 1970)`);
  }
  return new Date(seconds * 1000);
}
