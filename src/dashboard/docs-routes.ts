import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Marked, type Tokens } from 'marked';
import { notFound } from '../platform/errors.ts';
import type { App } from '../platform/http/app-types.ts';

// Mailroom's own documentation (docs/*.md), served as web pages at /guide/<name> (/docs is the API reference) so that the dashboard's
// "Learn more" links open the guide for the version running, with no network beyond Mailroom. The pages
// are rendered once, on the first request (Markdown by `marked`), and hold no script: their policy allows none.
// Like the dashboard's files, only what was found when first read is ever served.

export const DOCS_DIR = fileURLToPath(new URL('../../docs/', import.meta.url));

/** The documentation's paths as registered (pages and images, not API operations). */
export const DOCS_PATHS = ['/guide', '/guide/style.css', '/guide/:page', '/guide/screenshots/:file'] as const;

const DOCS_CSP = [
  "default-src 'none'",
  "style-src 'self'",
  "img-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

const HEADERS = {
  'content-security-policy': DOCS_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

const STYLE = `body{font:16px/1.55 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1b1f24;background:#fff;margin:0}
main{max-width:52rem;margin:0 auto;padding:1.5rem}nav{padding:.75rem 1.5rem;border-bottom:1px solid #d0d7de}
a{color:#1d4ed8}code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em}
pre{background:#f6f7f9;border:1px solid #d0d7de;border-radius:6px;padding:.75rem;overflow-x:auto}
:not(pre)>code{background:#f6f7f9;padding:0 .2em;border-radius:4px}img{max-width:100%;border:1px solid #d0d7de}
table{border-collapse:collapse;display:block;overflow-x:auto}th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}
@media (prefers-color-scheme:dark){body{color:#e6edf3;background:#0d1117}a{color:#6ea8fe}
pre,:not(pre)>code{background:#161b22}pre,th,td,img,nav{border-color:#3d444d}}`;

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes. */
export function headingAnchor(text: string): string {
  return text
    .toLowerCase()
    .replace(/<[^>]+>/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .trim()
    .replace(/\s/g, '-');
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

interface DocPage {
  title: string;
  html: Buffer;
}

function render(markdown: string): { title: string; body: string } {
  const seen = new Map<string, number>();
  let title = '';
  const marked = new Marked({
    gfm: true,
    renderer: {
      heading(
        this: { parser: { parseInline(tokens: Tokens.Generic[]): string } },
        { tokens, depth, text }: Tokens.Heading,
      ) {
        if (!title) title = text;
        const base = headingAnchor(text);
        const count = seen.get(base) ?? 0;
        seen.set(base, count + 1);
        const id = count === 0 ? base : `${base}-${count}`;
        return `<h${depth} id="${escapeHtml(id)}">${this.parser.parseInline(tokens)}</h${depth}>\n`;
      },
    },
  });
  const body = marked.parse(markdown, { async: false });
  return { title, body };
}

function page(title: string, body: string): Buffer {
  return Buffer.from(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Mailroom documentation</title><link rel="stylesheet" href="/guide/style.css"></head>
<body><nav><a href="/">Dashboard</a> · <a href="/guide">Documentation</a></nav><main>
${body}</main></body></html>`);
}

/** docs/ as it is when first read: each page rendered, and the names of its screenshots. */
function readDocs(dir: string): { pages: Map<string, DocPage>; index: Buffer; images: Set<string> } {
  const pages = new Map<string, DocPage>();
  const images = new Set<string>();
  if (existsSync(dir)) {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.md')) continue;
      const { title, body } = render(readFileSync(path.join(dir, entry.name), 'utf8'));
      const name = entry.name.slice(0, -'.md'.length);
      pages.set(name, { title: title || name, html: page(title || name, body) });
    }
    const screenshots = path.join(dir, 'screenshots');
    if (existsSync(screenshots)) {
      for (const entry of readdirSync(screenshots, { withFileTypes: true })) {
        if (entry.isFile() && entry.name.endsWith('.png')) images.add(entry.name);
      }
    }
  }
  const list = [...pages]
    .sort(([, a], [, b]) => a.title.localeCompare(b.title))
    .map(([name, doc]) => `<li><a href="/guide/${encodeURIComponent(name)}">${escapeHtml(doc.title)}</a></li>`)
    .join('\n');
  return { pages, images, index: page('Documentation', `<h1>Mailroom documentation</h1>\n<ul>\n${list}\n</ul>`) };
}

export function docsRoutes(dir: string = DOCS_DIR) {
  return async (app: App) => {
    // Read and rendered on the first request, not at start: most processes never serve the guide.
    let read: ReturnType<typeof readDocs> | undefined;
    const docsOf = () => (read ??= readDocs(dir));
    const options = { config: { access: 'public' as const }, schema: { hide: true } };

    app.get('/guide', options, async (_request, reply) =>
      reply.headers(HEADERS).type('text/html; charset=utf-8').send(docsOf().index),
    );

    app.get('/guide/style.css', options, async (_request, reply) =>
      reply.headers(HEADERS).type('text/css; charset=utf-8').send(STYLE),
    );

    app.get<{ Params: { page: string } }>('/guide/:page', options, async (request, reply) => {
      // `webhooks` or `webhooks.md`: links between the Markdown files name the file.
      const doc = docsOf().pages.get(request.params.page.replace(/\.md$/, ''));
      if (!doc) throw notFound('Documentation page');
      return reply.headers(HEADERS).type('text/html; charset=utf-8').send(doc.html);
    });

    app.get<{ Params: { file: string } }>('/guide/screenshots/:file', options, async (request, reply) => {
      if (!docsOf().images.has(request.params.file)) throw notFound('Documentation image');
      const body = await readFile(path.join(dir, 'screenshots', request.params.file));
      return reply.headers(HEADERS).type('image/png').send(body);
    });
  };
}
