import type { Queryable } from '../platform/db/database.ts';
import { escapeLike } from '../platform/db/like-pattern.ts';
import { addressKey } from '../platform/address-key.ts';
import { isUuid } from '../platform/ids.ts';

// GET /search: one box that finds anything the dashboard shows by what a person remembers of it: an id
// pasted from a log or a webhook, a recipient's address or part of it, a word of a subject, a name. Each kind
// is looked up by the cheapest way that answers it, so a search costs about the same with a million
// messages stored as with a thousand:
// - any id: the primary key of each table, exactly;
// - a whole address: the recipient index (every message to it, newest first) and the contact index. That
//   index is shared by all organizations, so an address that millions of messages went to, anywhere on
//   this Mailroom, costs more to look up than one that received a few;
// - a part of a subject or an address: the organization's newest RECENT_MESSAGES messages, newest first,
//   stopping at the first `limit` that match. Older messages are found by id or by whole address, or in
//   the Emails list's own search, which reads further. A trigram index would find any word in any message,
//   at the cost of more writes on every send, the path whose speed matters most;
// - contacts by part of their address or name, among the newest RECENT_CONTACTS; domains, templates,
//   broadcasts, webhook endpoints and API keys by part of their name (an organization has few of these).

/** How many of an organization's newest messages a part of a subject or an address is looked for in. */
export const RECENT_MESSAGES = 20_000;
/** How many of an organization's newest contacts a part of an address or a name is looked for in. */
export const RECENT_CONTACTS = 100_000;

export const SEARCH_LIMIT_DEFAULT = 5;
export const SEARCH_LIMIT_MAX = 20;

/** What a search can find, in the order results are given. */
export const SEARCH_KINDS = ['email', 'contact', 'domain', 'template', 'broadcast', 'webhook', 'api_key'] as const;
export type SearchKind = (typeof SEARCH_KINDS)[number];

export interface SearchResult {
  object: SearchKind;
  id: string;
  /** What the thing is called: a subject, an address, a name, a URL. */
  title: string;
  /** A second line that tells two results apart: recipients, a status, a permission. */
  detail: string;
  created_at: Date;
}

export interface SearchQuery {
  /** As typed: trimmed here. */
  text: string;
  /** At most this many results of each kind. */
  limit: number;
  /** Webhook endpoints are listed to dashboard sessions only, so they are searched for sessions only. */
  includeWebhooks: boolean;
}

interface Lookup {
  organizationId: string;
  /** The text, trimmed. */
  text: string;
  /** `%text%`, lower-cased and escaped, for LIKE. */
  pattern: string;
  /** The text when it is an id. */
  id: string | undefined;
  /** The text's address key when it looks like a whole address. */
  address: string | undefined;
  limit: number;
}

export async function search(db: Queryable, organizationId: string, query: SearchQuery) {
  const text = query.text.trim();
  const lookup: Lookup = {
    organizationId,
    text,
    pattern: `%${escapeLike(text.toLowerCase())}%`,
    id: isUuid(text) ? text.toLowerCase() : undefined,
    address: /^[^\s@]+@[^\s@]+$/.test(text) ? addressKey(text) : undefined,
    limit: query.limit,
  };
  // Independent lookups, run side by side on a pool (one after another on an embedded database).
  const found = await Promise.all([
    findEmails(db, lookup),
    findContacts(db, lookup),
    findByName(db, lookup, NAMED.domain),
    findByName(db, lookup, NAMED.template),
    findByName(db, lookup, NAMED.broadcast),
    query.includeWebhooks ? findByName(db, lookup, NAMED.webhook) : [],
    findByName(db, lookup, NAMED.api_key),
  ]);
  return { object: 'list' as const, query: text, data: found.flat() };
}

interface EmailRow {
  id: string;
  subject: string;
  to: string[];
  status: string;
  created_at: Date;
}

const EMAIL_COLUMNS = 'e.id, e.subject, e."to", e.status, e.created_at';

/** The message with this id; every message to this address; then messages whose subject or recipients hold the text. */
async function findEmails(db: Queryable, lookup: Lookup): Promise<SearchResult[]> {
  const { organizationId, limit } = lookup;
  const rows: EmailRow[] = [];
  if (lookup.id) {
    const byId = await db.query<EmailRow>(
      `SELECT ${EMAIL_COLUMNS} FROM emails e WHERE e.id = $1 AND e.organization_id = $2`,
      [lookup.id, organizationId],
    );
    rows.push(...byId.rows);
  }
  if (lookup.address) {
    const toAddress = await db.query<EmailRow>(
      `SELECT ${EMAIL_COLUMNS}
         FROM emails e
        WHERE e.organization_id = $1
          AND e.id IN (SELECT email_id FROM email_recipients WHERE lower(address) = $2)
        ORDER BY e.created_at DESC, e.id DESC
        LIMIT $3`,
      [organizationId, lookup.address, limit],
    );
    rows.push(...toAddress.rows);
  }
  if (rows.length < limit && !lookup.id) {
    // The newest messages first, read until `limit` match: a common word stops early, a rare one reads them all.
    const recent = await db.query<EmailRow>(
      `SELECT ${EMAIL_COLUMNS}
         FROM (SELECT id, subject, "to", cc, bcc, status, created_at FROM emails
                WHERE organization_id = $1
                ORDER BY created_at DESC, id DESC
                LIMIT ${RECENT_MESSAGES}) e
        WHERE lower(e.subject) LIKE $2 ESCAPE '\\'
           OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(e."to" || e.cc || e.bcc) address
                       WHERE lower(address) LIKE $2 ESCAPE '\\')
        ORDER BY e.created_at DESC, e.id DESC
        LIMIT $3`,
      [organizationId, lookup.pattern, limit],
    );
    rows.push(...recent.rows);
  }
  return unique(rows)
    .slice(0, limit)
    .map((row) => ({
      object: 'email',
      id: row.id,
      title: row.subject,
      detail: `${row.to.join(', ')} · ${row.status}`,
      created_at: row.created_at,
    }));
}

interface ContactRow {
  id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  created_at: Date;
}

/**
 * The contact with this id or address, then contacts whose address or name holds the text (not for an id:
 * no address or name holds one, and reading the contacts to be sure would cost most of the search).
 */
async function findContacts(db: Queryable, lookup: Lookup): Promise<SearchResult[]> {
  const { rows } = await db.query<ContactRow>(
    `(SELECT id, email, first_name, last_name, created_at, 0 AS rank FROM contacts
       WHERE organization_id = $1 AND (id = $2::uuid OR lower(email) = $3))
     UNION ALL
     (SELECT id, email, first_name, last_name, created_at, 1 AS rank
        FROM (SELECT * FROM contacts WHERE organization_id = $1
               ORDER BY created_at DESC, id DESC LIMIT ${RECENT_CONTACTS}) c
       WHERE $2::uuid IS NULL
         AND (lower(email) LIKE $4 ESCAPE '\\'
              OR lower(coalesce(first_name, '') || ' ' || coalesce(last_name, '')) LIKE $4 ESCAPE '\\')
       ORDER BY created_at DESC, id DESC
       LIMIT $5)
     ORDER BY rank, created_at DESC`,
    [
      lookup.organizationId,
      lookup.id ?? null,
      lookup.address ?? lookup.text.toLowerCase(),
      lookup.pattern,
      lookup.limit,
    ],
  );
  return unique(rows)
    .slice(0, lookup.limit)
    .map((row) => ({
      object: 'contact',
      id: row.id,
      title: row.email,
      detail: [row.first_name, row.last_name].filter(Boolean).join(' '),
      created_at: row.created_at,
    }));
}

/** A kind found by id or by part of its name (or of a second column): the organization has few of them. */
interface Named {
  object: SearchKind;
  table: string;
  /** The columns searched for the text, as SQL (the first is the title). */
  searched: string[];
  /** The second line, as SQL. */
  detail: string;
  /** Rows that no longer count (revoked keys). */
  where?: string;
}

const NAMED = {
  domain: { object: 'domain', table: 'domains', searched: ['name'], detail: 'status' },
  template: {
    object: 'template',
    table: 'templates',
    searched: ['name', "coalesce(alias, '')"],
    detail: "coalesce(alias, subject, '')",
  },
  broadcast: {
    object: 'broadcast',
    table: 'broadcasts',
    searched: ["coalesce(name, subject, 'Untitled broadcast')", "coalesce(subject, '')"],
    detail: 'status',
  },
  webhook: {
    object: 'webhook',
    table: 'webhook_endpoints',
    searched: ['url'],
    detail: "CASE WHEN enabled THEN 'enabled' ELSE 'disabled' END",
  },
  api_key: {
    object: 'api_key',
    table: 'api_keys',
    searched: ['name'],
    detail: 'permission',
    where: 'revoked_at IS NULL',
  },
} satisfies Record<string, Named>;

async function findByName(db: Queryable, lookup: Lookup, named: Named): Promise<SearchResult[]> {
  const matches = named.searched.map((column) => `lower(${column}) LIKE $3 ESCAPE '\\'`).join(' OR ');
  const { rows } = await db.query<{ id: string; title: string; detail: string; created_at: Date }>(
    `SELECT id, ${named.searched[0]} AS title, ${named.detail} AS detail, created_at
       FROM ${named.table}
      WHERE organization_id = $1 ${named.where ? `AND ${named.where}` : ''}
        AND (id = $2::uuid OR ${matches})
      ORDER BY id = $2::uuid DESC NULLS LAST, created_at DESC
      LIMIT $4`,
    [lookup.organizationId, lookup.id ?? null, lookup.pattern, lookup.limit],
  );
  return rows.map((row) => ({ object: named.object, ...row }));
}

function unique<T extends { id: string }>(rows: T[]): T[] {
  const seen = new Set<string>();
  return rows.filter((row) => !seen.has(row.id) && seen.add(row.id));
}
