// Is the dashboard quick with a million messages stored? Fills one organization with MESSAGES messages
// (bench/fill-messages.ts; to RECIPIENTS different addresses, a hundred of them with the subject "Password
// reset"), CONTACTS contacts and a few of everything else, serves the real app on loopback, and:
//   1. opens every page of the navigation in Chromium, signed in, and notes the API requests each makes
//      as it opens (its first data);
//   2. times those requests over HTTP, each page's together as the browser sends them, ROUNDS times, and
//      prints the p50 and p95 of each page's answer (target: p95 under 200 ms);
//   3. times GET /search for what people type (an id, an address, part of one, a word, a name, nothing
//      that exists), ROUNDS times each (target: p95 under 300 ms).
// The baseline, raced in the same rounds: GET /organization, the cheapest signed-in request (one row).
//
//   DATABASE_URL=postgres://… node bench/dashboard.ts     # MESSAGES=1000000 CONTACTS=100000 ROUNDS=100
//   MESSAGES=100000 node bench/dashboard.ts               # PGlite in memory, smaller
// Needs the dashboard built (npm run build:web) and Chromium (MAILROOM_TEST_CHROMIUM, default /usr/bin/chromium).
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { buildTestApp, createTestOrganization } from '../test/helpers/app.ts';
import { CHROMIUM } from '../test/helpers/browser.ts';
import { fillMessages } from './fill-messages.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 1_000_000);
const RECIPIENTS = Number(process.env.RECIPIENTS ?? 100_000);
const CONTACTS = Number(process.env.CONTACTS ?? 100_000);
const ROUNDS = Number(process.env.ROUNDS ?? 100);
const WARMUP = 5;

const t = await buildTestApp();
const org = await createTestOrganization(t.db, t.config, 'bench');
const domainId = (await t.db.query<{ id: string }>('SELECT id FROM domains WHERE organization_id = $1', [org.id]))
  .rows[0]!.id;
const auth = { authorization: `Bearer ${org.session}` };

console.log(`database: ${t.db.kind}`);
let started = performance.now();
await fillMessages(
  { db: t.db, organizationId: org.id, domainId, domain: org.domain, recipients: RECIPIENTS },
  0,
  MESSAGES,
);
await t.db.query(
  `UPDATE emails SET subject = 'Password reset for ' || ("to" ->> 0)
    WHERE organization_id = $1 AND id IN (SELECT id FROM emails WHERE organization_id = $1 ORDER BY random() LIMIT 100)`,
  [org.id],
);
await t.db.query(
  `INSERT INTO contacts (organization_id, email, first_name, last_name, created_at)
   SELECT $1, 'user' || i || '@example.com', 'First' || i, 'Last' || i,
          timestamptz '2026-01-01' + make_interval(secs => i)
     FROM generate_series(0, $2::int - 1) i`,
  [org.id, CONTACTS],
);
for (let i = 0; i < 20; i++) {
  await t.db.query(`INSERT INTO templates (organization_id, name, subject, html) VALUES ($1, $2, 'Hi', '<p>Hi</p>')`, [
    org.id,
    `Template ${i}`,
  ]);
  await t.db.query(`INSERT INTO broadcasts (organization_id, name, subject) VALUES ($1, $2, 'News')`, [
    org.id,
    `Broadcast ${i}`,
  ]);
}
await t.db.query('ANALYZE contacts');
console.log(
  `filled: ${MESSAGES.toLocaleString('en')} messages to ${RECIPIENTS.toLocaleString('en')} addresses, ` +
    `${CONTACTS.toLocaleString('en')} contacts, in ${((performance.now() - started) / 1000).toFixed(0)} s`,
);

const base = await t.app.listen({ host: '127.0.0.1', port: 0 });

// 1. What each page asks for as it opens, as the browser sends it.
const NAV_PAGES = [
  '/',
  '/emails',
  '/templates',
  '/broadcasts',
  '/automations',
  '/events',
  '/topics',
  '/segments',
  '/contact-properties',
  '/imports',
  '/suppressions',
  '/received',
  '/inbound-routes',
  '/domains',
  '/destinations',
  '/api-keys',
  '/webhooks',
  '/logs',
  '/settings',
];
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
const context = await browser.newContext({ baseURL: base });
const expiresAt = new Date(Date.now() + 3600_000).toISOString();
await context.addInitScript({
  content: `sessionStorage.setItem('mailroom.session', ${JSON.stringify(
    JSON.stringify({ token: org.session, email: org.userEmail, expiresAt }),
  )});`,
});
const page = await context.newPage();
const pageRequests = new Map<string, string[]>();
let current: string[] = [];
page.on('request', (request) => {
  const url = new URL(request.url());
  if (request.method() !== 'GET' || url.pathname === '/' || url.pathname.startsWith('/assets/')) return;
  // The frame's own request (the organization's name) is made once, not by each page.
  if (url.pathname === '/organization' && current.length === 0 && pageRequests.size === 0) return;
  current.push(url.pathname + url.search);
});
for (const address of NAV_PAGES) {
  current = [];
  await page.goto(`/#${address}`);
  await page.locator('main h1').waitFor();
  await page.locator('main .loading, main [aria-busy="true"]').first().waitFor({ state: 'detached', timeout: 60_000 });
  pageRequests.set(address, [...new Set(current)]);
}
await browser.close();

// 2 and 3: timed over HTTP, alternating with the baseline.
async function get(path: string): Promise<void> {
  const response = await fetch(base + path, { headers: auth });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
}

async function timed(paths: string[]): Promise<number> {
  const start = performance.now();
  await Promise.all(paths.map(get));
  return performance.now() - start;
}

const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!;

async function race(cases: Array<[string, string[]]>, target: number, title: string) {
  const times = new Map<string, number[]>(cases.map(([name]) => [name, []]));
  const baseline: number[] = [];
  for (let round = 0; round < WARMUP + ROUNDS; round++) {
    const organization = await timed(['/organization']);
    if (round >= WARMUP) baseline.push(organization);
    for (const [name, paths] of cases) {
      const elapsed = await timed(paths);
      if (round >= WARMUP) times.get(name)!.push(elapsed);
    }
  }
  const baseP50 = percentile(baseline, 0.5);
  console.log(`\n${title} (${ROUNDS} rounds; baseline GET /organization p50 ${baseP50.toFixed(1)} ms)`);
  let worst = 0;
  for (const [name, paths] of cases) {
    const values = times.get(name)!;
    const p95 = percentile(values, 0.95);
    worst = Math.max(worst, p95);
    console.log(
      `  ${name.padEnd(34)} p50 ${percentile(values, 0.5).toFixed(1).padStart(6)} ms  p95 ${p95.toFixed(1).padStart(6)} ms` +
        `  (${(percentile(values, 0.5) / baseP50).toFixed(1)}× baseline)  ${paths.join(' ')}`,
    );
  }
  console.log(`  worst p95 ${worst.toFixed(1)} ms: ${worst < target ? 'under' : 'OVER'} the ${target} ms target`);
}

started = performance.now();
await race(
  [...pageRequests].map(([address, paths]) => [address, paths] as [string, string[]]),
  200,
  'List pages: their first data',
);

const anEmail = (
  await t.db.query<{ id: string }>(
    `SELECT id FROM emails WHERE organization_id = $1 ORDER BY created_at LIMIT 1 OFFSET $2`,
    [org.id, Math.floor(MESSAGES / 3)],
  )
).rows[0]!.id;
const q = (text: string) => [`/search?q=${encodeURIComponent(text)}`];
await race(
  [
    ['an email id', q(anEmail)],
    ['a whole address (10 messages)', q(`user${Math.floor(RECIPIENTS / 2)}@example.com`)],
    ['part of an address', q(`user${Math.floor(RECIPIENTS / 3)}@`)],
    ['a common word', q('message')],
    ['a rare word (100 messages)', q('password reset')],
    ['a name', q('First4242')],
    ['a domain', q(org.domain.slice(0, 6))],
    ['nothing that exists', q('zzzz-nowhere')],
  ],
  300,
  'Search',
);
console.log(`\n(timed in ${((performance.now() - started) / 1000).toFixed(0)} s)`);
await t.close();
