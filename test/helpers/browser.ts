// The dashboard driven in a real browser: a real `mailroom serve` process on this file's own database
// (PGlite directory, or a fresh PostgreSQL database with DATABASE_URL), an organization and a user made
// with the CLI, and Chromium through playwright-core. One server and one browser per test file; each
// test gets a fresh browser context (its own sessionStorage) and, when it fails, leaves a screenshot in
// test-results/screenshots/.
// Code that runs in the page is passed as a string (`page.evaluate('document.title')`): the tests are
// type-checked for Node, without the DOM's names.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';
import { DASHBOARD_DIST } from '../../src/dashboard/dashboard-routes.ts';
import { runCli } from './cli.ts';
import { databaseForProcesses } from './database.ts';
import { startServerProcess, type ServerProcess } from './server-process.ts';

/** The Chromium (or Chrome) binary; Debian's package by default. */
export const CHROMIUM = process.env.MAILROOM_TEST_CHROMIUM || '/usr/bin/chromium';

const ROOT = path.resolve(import.meta.dirname, '../..');
export const FAILURE_SCREENSHOTS = path.join(ROOT, 'test-results', 'screenshots');
export const DOC_SCREENSHOTS = path.join(ROOT, 'docs', 'screenshots');

/** Desktop and phone sizes every page must work at. */
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

export interface DashboardUser {
  email: string;
  password: string;
}

export interface Dashboard {
  /** `http://127.0.0.1:PORT` of the server. */
  base: string;
  server: ServerProcess;
  browser: Browser;
  organizationId: string;
  user: DashboardUser;
  /** Environment pointing a CLI or a second process at the same database. */
  env: Record<string, string>;
  close(): Promise<void>;
}

async function cli(env: Record<string, string>, ...args: string[]): Promise<Record<string, unknown>> {
  const res = await runCli([...args, '--json'], env);
  if (res.code !== 0) throw new Error(`mailroom ${args.join(' ')} failed: ${res.stdout}${res.stderr}`);
  return res.json as Record<string, unknown>;
}

/**
 * Starts the server with an organization and a user made by the CLI (before the server, so that a PGlite
 * directory is never open twice), and launches the browser. Call in `before`, close in `after`.
 */
export async function startDashboard(
  options: {
    env?: Record<string, string>;
    organizationName?: string;
    /**
     * Runs CLI commands (domains, keys) or writes to the database (`env` points at it) before the server
     * starts: a PGlite directory has one user at a time.
     */
    prepare?: (
      cli: (...args: string[]) => Promise<Record<string, unknown>>,
      organizationId: string,
      env: Record<string, string>,
    ) => Promise<void>;
  } = {},
): Promise<Dashboard> {
  if (!existsSync(path.join(DASHBOARD_DIST, 'index.html'))) {
    throw new Error('The dashboard is not built: run `npm run build:web` (npm ci runs it) before the browser tests');
  }
  if (!existsSync(CHROMIUM)) {
    throw new Error(`No Chromium at ${CHROMIUM}: install it (apt-get install chromium) or set MAILROOM_TEST_CHROMIUM`);
  }
  const { env, cleanup } = await databaseForProcesses('dashboard');
  const org = await cli(env, 'org', 'create', '--name', options.organizationName ?? 'Acme Test');
  const user = { email: 'owner@acme.example', password: 'correct horse battery staple' };
  await cli(env, 'user', 'create', '--org', org.id as string, '--email', user.email, '--password', user.password);
  await options.prepare?.((...args) => cli(env, ...args), org.id as string, env);
  const server = await startServerProcess({ ...env, ...options.env });
  let browser: Browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  } catch (error) {
    server.child.kill('SIGTERM');
    await server.exited;
    await cleanup();
    throw error;
  }
  return {
    base: server.base,
    server,
    browser,
    organizationId: org.id as string,
    user,
    env,
    async close() {
      await browser.close();
      server.child.kill('SIGTERM');
      await server.exited;
      await cleanup();
    },
  };
}

export interface PageRun {
  page: Page;
  /** Console errors and Content-Security-Policy violations seen so far, in words. */
  problems: string[];
}

/** A file name from a test's name: letters, digits and dashes. */
export const fileNameOf = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 100);

/**
 * Runs `body` with a new page in a fresh context (no session) at DESKTOP size unless told otherwise.
 * On failure it saves test-results/screenshots/<test name>.png and adds the console's problems to the error.
 */
export async function withPage(
  t: TestContext,
  dashboard: Dashboard,
  body: (run: PageRun) => Promise<void>,
  contextOptions: BrowserContextOptions = {},
): Promise<void> {
  const context = await dashboard.browser.newContext({ viewport: DESKTOP, baseURL: dashboard.base, ...contextOptions });
  const page = await context.newPage();
  // Generous: a 2-core CI machine running the server, the worker and Chromium at once is slow, not broken.
  page.setDefaultTimeout(20_000);
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  // Injected by the browser itself, so the page's own policy does not stop it from reporting.
  await page.addInitScript({
    content: `document.addEventListener('securitypolicyviolation', (event) => {
      console.error('CSP violation: ' + event.violatedDirective + ' blocked ' + (event.blockedURI || 'inline code'));
    });`,
  });
  try {
    await body({ page, problems });
  } catch (error) {
    await mkdir(FAILURE_SCREENSHOTS, { recursive: true });
    const file = path.join(FAILURE_SCREENSHOTS, `${fileNameOf(t.fullName ?? t.name)}.png`);
    await page.screenshot({ path: file, fullPage: true }).catch(() => undefined);
    if (error instanceof Error) {
      error.message += `\nscreenshot: ${path.relative(ROOT, file)}`;
      if (problems.length > 0) error.message += `\nbrowser problems:\n${problems.join('\n')}`;
    }
    throw error;
  } finally {
    await context.close();
  }
}

/** Signs in through the form and waits for the Overview page. */
export async function signIn(page: Page, email: string, password: string): Promise<void> {
  await page.goto('/');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
}

/** The session token the signed-in page keeps (sessionStorage), or undefined when signed out. */
export async function sessionToken(page: Page): Promise<string | undefined> {
  const stored = await page.evaluate<string | null>("sessionStorage.getItem('mailroom.session')");
  return stored === null ? undefined : (JSON.parse(stored) as { token: string }).token;
}

/** Goes to a dashboard address (`/emails?status=sent`) and waits for the page's h1 to be `heading`. */
export async function openPage(page: Page, address: string, heading: string | RegExp): Promise<void> {
  await page.goto(`/#${address}`);
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
}

/**
 * Waits until the page shows no progress: no "Loading…" status and nothing marked aria-busy. Used
 * instead of network silence, which a slow machine or a preview frame can put off past any timeout.
 */
export async function waitUntilLoaded(page: Page): Promise<void> {
  await page.locator('main').waitFor();
  await page.locator('main .loading, main [aria-busy="true"]').first().waitFor({ state: 'detached' });
}

/**
 * A screenshot for docs/dashboard.md, written to docs/screenshots/<name>.png only when
 * MAILROOM_DOC_SCREENSHOTS=1 (so ordinary test runs leave the work tree alone). Viewport only, not the
 * full page, to keep the committed files small.
 */
export async function docScreenshot(page: Page, name: string): Promise<void> {
  if (process.env.MAILROOM_DOC_SCREENSHOTS !== '1') return;
  await mkdir(DOC_SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(DOC_SCREENSHOTS, `${name}.png`), animations: 'disabled', caret: 'hide' });
}

export interface SendingDashboard {
  dashboard: Dashboard;
  /** Calls the API with a full_access key; fails the test on an error answer. */
  api(method: string, route: string, body?: unknown): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

/**
 * A dashboard whose organization can send from `domain` (verified) with a full_access key, delivering
 * through the capture transport on either database, so every message reaches `delivered` and keeps its
 * raw source (PostgreSQL's default transport is mx, and there the captured files need a directory).
 */
export async function startSendingDashboard(
  domain: string,
  options: {
    /** Writes to the database (`env` points at it) before the server starts. */
    prepare?: (env: Record<string, string>, organizationId: string) => Promise<void>;
    /** More settings for the server (e.g. MAILROOM_INBOUND_PORT). */
    env?: Record<string, string>;
  } = {},
): Promise<SendingDashboard> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'mailroom-dashboard-'));
  const env: Record<string, string> = { MAILROOM_TRANSPORT: 'capture', ...options.env };
  if (process.env.DATABASE_URL) env.MAILROOM_DATA_DIR = dataDir;
  let key = '';
  const dashboard = await startDashboard({
    env,
    async prepare(cli, org, processEnv) {
      await cli('domain', 'add', '--org', org, domain);
      await cli('domain', 'verify', '--org', org, domain, '--trust');
      key = (await cli('key', 'create', '--org', org, '--name', 'test', '--permission', 'full_access')).token as string;
      await options.prepare?.(processEnv, org);
    },
  });
  return {
    dashboard,
    async api(method, route, body) {
      const res = await fetch(`${dashboard.base}${route}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const json = (await res.json()) as Record<string, unknown>;
      assert.ok(res.ok, `${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    },
    async close() {
      await dashboard.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
