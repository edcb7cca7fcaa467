// Browser-test harness: start the built app (`node build/index.js`) as a real process on a free
// port with its own store — a temp PGlite folder, or a fresh database on the Postgres in
// DATABASE_URL — kill and restart it, and drive it from headless Chromium (playwright-core).
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate, openDb } from 'agent-kit';
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';
import { afterEach, inject } from 'vitest';

export const appDir = dirname(dirname(fileURLToPath(import.meta.url)));
export const repoDir = dirname(dirname(appDir));
const serverEntry = join(appDir, 'build', 'index.js');
export const resultsDir = join(appDir, 'test-results');
export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = existsSync(chromiumPath);
const serverStartMaxMs = 30_000; // PGlite's first initdb takes 3–4 s; allow for a loaded CI box

// Locally a missing browser skips with a reason; in CI it must fail, or the suite would go
// green having tested nothing.
if (!hasChromium && process.env.CI === 'true') {
  throw new Error(`Chromium is missing at ${chromiumPath} but CI=true: install it (apt-get install -y chromium).`);
}
if (!existsSync(serverEntry)) {
  throw new Error(`${serverEntry} is missing: run \`npm run build -w sveltekit-chat\` first.`);
}
export const skipReason = `no Chromium at ${chromiumPath}; apt-get install -y chromium`;

const chromiumArgs = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
}

/** Asks the OS for a free loopback port by binding port 0 and releasing it. */
export async function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** One test file's store: a temp data folder, plus a fresh migrated database on Postgres. */
export interface TestStore {
  dataDir: string;
  databaseUrl: string | undefined;
  dispose(): Promise<void>;
}

/** A fresh store; with DATABASE_URL set, a new database on that server, dropped by dispose(). */
export async function createTestStore(): Promise<TestStore> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sveltekit-chat-'));
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    // A copy of the run's migrated template (global-setup.ts); no session secret in it, so
    // each file's server makes its own.
    const template = inject('pgliteTemplateDir');
    if (template) cpSync(join(template, 'pgdata'), join(dataDir, 'pgdata'), { recursive: true });
    return { dataDir, databaseUrl: undefined, dispose: async () => rmSync(dataDir, { recursive: true, force: true }) };
  }
  const name = `ak_chat_${crypto.randomBytes(6).toString('hex')}`;
  const admin = await openDb({ databaseUrl: serverUrl });
  await admin.query(`create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const db = await openDb({ databaseUrl: url.href });
  await migrate(db); // production never auto-migrates; the operator runs `agent-kit migrate`
  await db.close();
  return {
    dataDir,
    databaseUrl: url.href,
    async dispose() {
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface AppServer {
  baseUrl: string;
  process: ChildProcess;
  output(): string;
  /** SIGKILL: the process dies mid-whatever, like a platform killing a function. */
  kill(): Promise<void>;
  /** SIGTERM and wait for the graceful exit. */
  stop(): Promise<void>;
}

export interface StartOptions {
  store: TestStore;
  port?: number;
  env?: Record<string, string>;
}

/** Start `node build/index.js` and wait until /api/health answers. */
export async function startServer(options: StartOptions): Promise<AppServer> {
  const port = options.port ?? (await findFreePort());
  const baseUrl = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    ORIGIN: baseUrl,
    // Node closes a connection idle for 5 s; Playwright's request context reuses one without the
    // retry a browser makes, so a request sent as the server closes it failed with ECONNRESET
    // (once in CI). Idle connections stay open for the length of a test file instead.
    KEEP_ALIVE_TIMEOUT: '600',
    AGENT_KIT_DATA_DIR: options.store.dataDir,
    ...options.env,
  };
  delete env.DATABASE_URL;
  if (options.store.databaseUrl) env.DATABASE_URL = options.store.databaseUrl;
  let output = '';
  const child = spawn(process.execPath, [serverEntry], { cwd: appDir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const server: AppServer = {
    baseUrl,
    process: child,
    output: () => output,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  await waitForHealth(server);
  return server;
}

async function waitForHealth(server: AppServer): Promise<void> {
  const deadline = Date.now() + serverStartMaxMs;
  while (Date.now() < deadline) {
    if (server.process.exitCode !== null) {
      throw new Error(`server exited with ${server.process.exitCode} before listening:\n${server.output()}`);
    }
    try {
      const response = await fetch(`${server.baseUrl}/api/health`);
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`server did not answer within ${serverStartMaxMs} ms:\n${server.output()}`);
}

/**
 * Go to `url` and wait until the app has hydrated: before that, typing can be lost and the
 * composer's submit is a plain GET, which a fast test would otherwise race.
 */
export async function open(page: Page, url: string) {
  const response = await page.goto(url);
  await page.locator('html[data-hydrated]').waitFor({ state: 'attached' });
  return response;
}

/** Reload and wait for hydration again. */
export async function reload(page: Page): Promise<void> {
  await page.reload();
  await page.locator('html[data-hydrated]').waitFor({ state: 'attached' });
}

/** A browser context signed in as `name` through the login form; `options` add to its settings (a touch screen). */
export async function signIn(
  browser: Browser, baseUrl: string, name: string, options: BrowserContextOptions = {},
): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 }, ...options });
  const page = await context.newPage();
  await open(page, `${baseUrl}/login`);
  await page.getByLabel('User name').fill(name);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${baseUrl}/`);
  await page.close();
  return context;
}

/** Send a chat message from the composer; resolves with the thread id once the URL names it. */
export async function sendChat(page: Page, text: string): Promise<string> {
  await page.getByRole('textbox', { name: 'Message' }).fill(text);
  await page.getByRole('button', { name: 'Send' }).click();
  await page.waitForURL(/\/t\/[0-9a-f-]{36}$/);
  return page.url().split('/t/')[1]!;
}

/** The text of the page's (only, or last) assistant turn. */
export async function lastRunText(page: Page): Promise<string> {
  return (await page.getByTestId('run-text').last().textContent()) ?? '';
}

/** Wait until the last assistant turn has `status` (data-status), e.g. 'completed'. */
export async function waitForRunStatus(page: Page, status: string, timeoutMs = 30_000): Promise<void> {
  // The last turn's, not the last of those with the status: an earlier turn's must not do.
  await page.waitForFunction((wanted) => {
    const runs = document.querySelectorAll('[data-testid="run"]');
    return runs[runs.length - 1]?.getAttribute('data-status') === wanted;
  }, status, { timeout: timeoutMs });
}

/** Wait until the last assistant turn has at least `words` words streamed. */
export async function waitForWords(page: Page, words: number, timeoutMs = 15_000): Promise<void> {
  await page.waitForFunction(
    (min) => {
      const texts = document.querySelectorAll('[data-testid="run-text"]');
      const text = texts[texts.length - 1]?.textContent ?? '';
      return text.trim().split(/\s+/).filter(Boolean).length >= min;
    },
    words,
    { timeout: timeoutMs },
  );
}

/**
 * Wait until the chat's status region (the one a screen reader announces) says `text` last: on
 * its own, or after the sentences of earlier events that came in the same network read.
 */
export async function waitForAnnouncement(page: Page, text: string): Promise<void> {
  await page.waitForFunction((expected) => {
    const said = document.querySelector('[data-testid="announcer"]')?.textContent?.trim() ?? '';
    return said === expected || said.endsWith(` ${expected}`);
  }, text);
}

/** Record what the status region says, in order, from now on (across the move to a thread's URL). */
export async function recordAnnouncements(page: Page): Promise<void> {
  await page.evaluate(() => {
    const said: string[] = [];
    Object.assign(window, { said });
    new MutationObserver(() => {
      const text = document.querySelector('[data-testid="announcer"]')?.textContent?.trim() ?? '';
      if (text && text !== said.at(-1)) said.push(text);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
}

/**
 * What the status region said since recordAnnouncements, sentence by sentence: the sentences of
 * events that arrive in one network read are said in one update, and which events share a read
 * is up to the network.
 */
export async function announcementsSaid(page: Page): Promise<string[]> {
  const said = await page.evaluate(() => (window as unknown as { said: string[] }).said);
  return said.flatMap((text) => text.split(/(?<=[.…])\s+(?=[A-Z])/));
}

/**
 * Record, from now on, each model-retry notice as it first appears, with the reply's text at that
 * moment: a notice is up only while the turn waits (a second here), which a test that looked for
 * it afterwards could miss on a slow machine.
 */
export async function recordRetryNotices(page: Page): Promise<void> {
  await page.evaluate(() => {
    const notices: { notice: string; text: string }[] = [];
    Object.assign(window, { retryNotices: notices });
    new MutationObserver(() => {
      const notice = document.querySelector('[data-testid="model-retry"]')?.textContent?.trim() ?? '';
      const texts = document.querySelectorAll('[data-testid="run-text"]');
      if (notice && notice !== notices.at(-1)?.notice) notices.push({ notice, text: (texts[texts.length - 1]?.textContent ?? '').trim() });
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
}

/** The notices recordRetryNotices saw, once there are `count` of them. */
export async function retryNoticesSeen(page: Page, count = 1): Promise<{ notice: string; text: string }[]> {
  await page.waitForFunction((n) => (window as unknown as { retryNotices: unknown[] }).retryNotices.length >= n, count);
  return page.evaluate(() => (window as unknown as { retryNotices: { notice: string; text: string }[] }).retryNotices);
}

/** Save a screenshot under test-results/, and under docs/images/ when SAVE_SCREENSHOTS=1. */
export async function saveScreenshot(page: Page, name: string): Promise<void> {
  mkdirSync(resultsDir, { recursive: true });
  await page.screenshot({ path: join(resultsDir, name), fullPage: true });
  if (process.env.SAVE_SCREENSHOTS === '1') {
    const imagesDir = join(repoDir, 'docs', 'images');
    mkdirSync(imagesDir, { recursive: true });
    await page.screenshot({ path: join(imagesDir, name), fullPage: true });
  }
}

/** After a failed test, print the server's output: its logs say what the page could not. */
export function printServerOutputOnFailure(server: () => AppServer | undefined): void {
  afterEach((context) => {
    if (context.task.result?.state === 'fail') console.error(`server output:\n${server()?.output() ?? '(none)'}`);
  });
}
