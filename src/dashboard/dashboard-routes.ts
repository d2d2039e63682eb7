import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { notFound } from '../platform/errors.ts';
import type { App } from '../platform/http/app-types.ts';

// The web dashboard: the single-page app Vite builds into web/dist (`npm run build:web`, run by
// `prepare` on `npm ci`), served from the API's own process. Its index is `/`, its hashed files are under
// `/assets/`; pages are addressed by the URL's #fragment, so no dashboard path can shadow an API path.
// The files are read once at start: only what the build produced can ever be served (no path from a
// request reaches the file system).

export const DASHBOARD_DIST = fileURLToPath(new URL('../../web/dist/', import.meta.url));

/** The dashboard's paths as registered (they are pages and files, not API operations). */
export const DASHBOARD_PATHS = ['/', '/assets/:file'] as const;

/**
 * What the browser may do on a dashboard page: scripts, styles, images and requests from this origin
 * only (no inline script), message previews framed from this origin, and the dashboard itself framed by
 * no one (clickjacking).
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "object-src 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': DASHBOARD_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.map': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
};

export const NOT_BUILT_MESSAGE =
  'The Mailroom dashboard is not built. Run `npm run build:web` in the Mailroom directory, then restart Mailroom. (The API is unaffected.)\n';

interface StaticFile {
  body: Buffer;
  /** Whether the body is text (scripts, styles, SVG), which is sent gzipped to a browser that takes it. */
  compressible: boolean;
  /** The body gzipped, made on the first request that takes it and kept. */
  gzipped?: Buffer;
  type: string;
}

/** Text compresses to a third or less; images and fonts are compressed already. */
const COMPRESSIBLE = new Set(['.js', '.css', '.svg', '.json', '.txt', '.html']);

/** web/dist as it is now: its index and its assets by file name, or undefined when it was never built. */
function readBuild(dist: string): { index: Buffer; assets: Map<string, StaticFile> } | undefined {
  const indexPath = path.join(dist, 'index.html');
  if (!existsSync(indexPath)) return undefined;
  const assets = new Map<string, StaticFile>();
  const assetDir = path.join(dist, 'assets');
  if (existsSync(assetDir)) {
    for (const entry of readdirSync(assetDir, { withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const extension = path.extname(entry.name);
      const type = CONTENT_TYPES[extension] ?? 'application/octet-stream';
      const body = readFileSync(path.join(assetDir, entry.name));
      assets.set(entry.name, { body, compressible: COMPRESSIBLE.has(extension), type });
    }
  }
  return { index: readFileSync(indexPath), assets };
}

export function dashboardRoutes(dist: string = DASHBOARD_DIST) {
  return async (app: App) => {
    const build = readBuild(dist);
    if (!build) app.log.warn(`the dashboard is not built (no ${dist}index.html): run \`npm run build:web\``);

    app.get('/', { config: { access: 'public' }, schema: { hide: true } }, async (_request, reply) => {
      reply.headers(SECURITY_HEADERS).header('cache-control', 'no-cache');
      if (!build) return reply.code(503).type('text/plain; charset=utf-8').send(NOT_BUILT_MESSAGE);
      return reply.type(CONTENT_TYPES['.html']!).send(build.index);
    });

    app.get<{ Params: { file: string } }>(
      '/assets/:file',
      { config: { access: 'public' }, schema: { hide: true } },
      async (request, reply) => {
        const file = build?.assets.get(request.params.file);
        if (!file) throw notFound('Dashboard file');
        // Asset names carry a hash of their content: a changed file is a new name, so caching forever is safe.
        reply.headers(SECURITY_HEADERS).header('cache-control', 'public, max-age=31536000, immutable');
        reply.type(file.type);
        if (!file.compressible) return reply.send(file.body);
        reply.header('vary', 'accept-encoding');
        if (!acceptsGzip(request.headers['accept-encoding'])) return reply.send(file.body);
        file.gzipped ??= gzipSync(file.body, { level: 9 });
        return reply.header('content-encoding', 'gzip').send(file.gzipped);
      },
    );
  };
}

/** Whether an Accept-Encoding header takes gzip: named with a q above 0, or not named and `*` is. */
export function acceptsGzip(header: string | undefined): boolean {
  if (!header) return false;
  const weights = new Map<string, number>();
  for (const part of header.split(',')) {
    const [coding = '', ...parameters] = part.split(';').map((piece) => piece.trim().toLowerCase());
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    weights.set(coding, q === undefined ? 1 : Number(q.slice(2)));
  }
  const weight = weights.get('gzip') ?? weights.get('*') ?? 0;
  return weight > 0;
}
