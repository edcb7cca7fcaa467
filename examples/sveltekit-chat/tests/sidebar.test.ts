// The thread list's statuses stay true for threads the page does not follow: a turn left to run in
// one thread while the user went on in another shows as done once it is, without a reload.
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestStore, hasChromium, launchBrowser, open, printServerOutputOnFailure, sendChat, signIn, skipReason,
  startServer, waitForRunStatus, waitForWords, type AppServer, type TestStore,
} from './harness';

/** The status the thread list shows for `threadId` ('' for none: its last run completed). */
function listedStatus(page: Page, threadId: string): Promise<string> {
  return page.getByRole('navigation', { name: 'Threads' }).locator(`a[href="/t/${threadId}"]`)
    .evaluate((link) => link.querySelector('.status')?.textContent ?? '');
}

describe.skipIf(!hasChromium)(`the thread list${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;
  let alice: BrowserContext;

  beforeAll(async () => {
    store = await createTestStore();
    // A reply of about 4 s: long enough to start another thread while it runs.
    server = await startServer({ store, env: { AGENT_KIT_SCRIPTED_TOKENS: '50', AGENT_KIT_SCRIPTED_DELAY_MS: '80' } });
    browser = await launchBrowser();
    alice = await signIn(browser, server.baseUrl, 'alice');
  });

  printServerOutputOnFailure(() => server);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await store?.dispose();
  });

  it("shows another thread's turn as done once it is, while the page follows its own thread", async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const first = await sendChat(page, 'A long answer, please');
    await waitForWords(page, 2);
    await page.getByRole('link', { name: '+ New chat' }).click();
    await page.waitForURL(`${server.baseUrl}/`);
    // The second thread's turn parks at once on its question: the list is read then, the first
    // thread's turn still running.
    await sendChat(page, 'Quick question #ask');
    await waitForRunStatus(page, 'waiting_input');
    await expect.poll(() => listedStatus(page, first), { timeout: 5_000 }).toBe('replying');
    const read = async () => (await (await page.request.get(`${server.baseUrl}/api/threads/${first}`)).json()) as { runs: { status: string }[] };
    await expect.poll(async () => (await read()).runs.at(-1)!.status, { timeout: 30_000 }).toBe('completed');
    // (was: "running" until a reload, or this thread's next turn)
    await expect.poll(() => listedStatus(page, first), { timeout: 10_000 }).toBe('');
    await page.close();
  });
});
