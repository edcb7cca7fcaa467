// How long the reference app takes to open a thread, by the thread's length: the built app on
// its own store, threads of 1, 300 and 1,000 turns made through POST /api/chat (the scripted
// model, no delay), each opened in headless Chromium until its last message shows. The opens
// of the threads alternate, and each length is reported as the median against the one-turn
// thread opened in the same run (the machine's noise falls on both).
//
//   npm run build && npm run build -w sveltekit-chat
//   npm run bench -w sveltekit-chat [-- --turns=1,300,1000 --opens=5]
//
// With DATABASE_URL set, on a fresh database of that server (dropped at the end); otherwise on
// the embedded store in a temporary folder. A measurement, not a test: CI does not run it.
import crypto from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext } from 'playwright-core';
// The browser tests' harness: the same server start, store and sign-in as the tests.
import {
  createTestStore, hasChromium, launchBrowser, signIn, skipReason, startServer, type TestStore,
} from '../tests/harness.js';

function readArgs(argv: string[]) {
  let turns = [1, 300, 1_000];
  let opens = 5;
  for (const arg of argv) {
    if (arg.startsWith('--turns=')) turns = arg.slice(8).split(',').map(Number);
    else if (arg.startsWith('--opens=')) opens = Number(arg.slice(8));
    else throw new Error(`unknown argument ${arg}; use --turns=1,300,1000 --opens=5`);
  }
  if (turns.some((n) => !Number.isInteger(n) || n < 1) || !Number.isInteger(opens) || opens < 1) {
    throw new Error('--turns takes whole numbers of at least 1, --opens one whole number of at least 1');
  }
  return { turns: [...new Set(turns)].sort((a, b) => a - b), opens };
}

/** A fresh database on DATABASE_URL's server (as the tests make), or an empty embedded store. */
async function freshStore(): Promise<TestStore> {
  if (process.env.DATABASE_URL) return createTestStore();
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-open-'));
  return { dataDir, databaseUrl: undefined, dispose: async () => rmSync(dataDir, { recursive: true, force: true }) };
}

/** A thread of `turns` turns, each one POST /api/chat read to its end; its id. */
async function makeThread(context: BrowserContext, baseUrl: string, tag: string, turns: number): Promise<string> {
  let threadId: string | undefined;
  for (let i = 0; i < turns; i++) {
    const response = await context.request.post(`${baseUrl}/api/chat`, {
      data: { ...(threadId ? { threadId } : {}), message: lastMessage(tag, i), clientMessageId: crypto.randomUUID() },
    });
    if (!response.ok()) throw new Error(`POST /api/chat answered ${response.status()}: ${await response.text()}`);
    await response.body();
    threadId ??= response.headers()['x-agent-kit-thread-id'];
  }
  if (!threadId) throw new Error('POST /api/chat named no thread');
  return threadId;
}

const lastMessage = (tag: string, i: number) => `${tag} message ${i + 1}`;

/** Open the thread's page; ms until its last user message shows in the transcript. */
async function openThread(context: BrowserContext, baseUrl: string, threadId: string, last: string): Promise<number> {
  const page = await context.newPage();
  try {
    const startAt = performance.now();
    await page.goto(`${baseUrl}/t/${threadId}`);
    await page.getByTestId('transcript').getByText(last, { exact: true }).waitFor({ timeout: 300_000 });
    return performance.now() - startAt;
  } finally {
    await page.close();
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main() {
  const { turns, opens } = readArgs(process.argv.slice(2));
  if (!hasChromium) throw new Error(skipReason);
  const store = await freshStore();
  const app = await startServer({ store, env: { AGENT_KIT_SCRIPTED_DELAY_MS: '0', AGENT_KIT_SCRIPTED_TOKENS: '30' } });
  const browser = await launchBrowser();
  try {
    const context = await signIn(browser, app.baseUrl, 'bench');
    const threads = [];
    for (const n of turns) {
      const startAt = performance.now();
      const tag = `t${n}`;
      const id = await makeThread(context, app.baseUrl, tag, n);
      process.stderr.write(`[bench] a thread of ${n} turns made in ${((performance.now() - startAt) / 1000).toFixed(1)} s\n`);
      threads.push({ turns: n, id, last: lastMessage(tag, n - 1), ms: [] as number[] });
    }
    await openThread(context, app.baseUrl, threads[0]!.id, threads[0]!.last); // warm the server and the browser
    for (let round = 0; round < opens; round++) {
      for (const thread of round % 2 === 0 ? threads : [...threads].reverse()) {
        thread.ms.push(await openThread(context, app.baseUrl, thread.id, thread.last));
      }
    }
    const base = median(threads[0]!.ms);
    console.log(`\n| turns | open, median of ${opens} (ms) | vs ${threads[0]!.turns} turn(s) | ms per turn above it |`);
    console.log('| --- | --- | --- | --- |');
    for (const thread of threads) {
      const ms = median(thread.ms);
      const perTurn = thread.turns > threads[0]!.turns ? ((ms - base) / (thread.turns - threads[0]!.turns)).toFixed(2) : '';
      console.log(`| ${thread.turns} | ${ms.toFixed(0)} | ${(ms / base).toFixed(2)}× | ${perTurn} |`);
    }
    console.log(`\nstore: ${store.databaseUrl ? 'postgres' : 'embedded'}; opens: ${threads.map((t) => t.ms.map((x) => x.toFixed(0)).join('/')).join(', ')}`);
  } finally {
    await browser.close();
    await app.stop();
    await store.dispose();
  }
}

await main();
