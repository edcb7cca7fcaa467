// On a phone (390 px wide) the pages keep the screen's width: a long thread title is cut in the
// thread list, and the operator page's wide tables scroll inside their own box. Chromium.
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestStore, hasChromium, launchBrowser, open, printServerOutputOnFailure, sendChat, signIn, skipReason,
  startServer, waitForRunStatus, type AppServer, type TestStore,
} from './harness';

const phone = { width: 390, height: 844 };

/** How far the page reaches past the screen's right edge, in px (0: it fits). */
function overflow(page: Page): Promise<number> {
  return page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
}

describe.skipIf(!hasChromium)(`a phone-wide screen${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;
  let alice: BrowserContext;
  let operator: BrowserContext;

  beforeAll(async () => {
    store = await createTestStore();
    server = await startServer({ store, env: { AGENT_KIT_SCRIPTED_TOKENS: '6', AGENT_KIT_SCRIPTED_DELAY_MS: '0' } });
    browser = await launchBrowser();
    alice = await signIn(browser, server.baseUrl, 'alice');
    operator = await signIn(browser, server.baseUrl, 'operator');
  });

  printServerOutputOnFailure(() => server);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await store?.dispose();
  });

  it('keeps the chat page and the operator page within the screen, long titles and wide tables included', async () => {
    const chat = await alice.newPage();
    await chat.setViewportSize(phone);
    await open(chat, `${server.baseUrl}/`);
    // Titles wider than the screen: the thread list is a column of its own on a phone.
    await sendChat(chat, `https://example.com/${'a-very-long-path-segment/'.repeat(6)} please summarise this page`);
    await waitForRunStatus(chat, 'completed');
    await open(chat, `${server.baseUrl}/`);
    const threadId = await sendChat(chat, 'Another conversation whose first message makes a title much wider than a phone screen is');
    await waitForRunStatus(chat, 'completed');
    await chat.getByTestId('transcript').waitFor();
    expect(await overflow(chat), 'the chat page is wider than the screen').toBeLessThanOrEqual(0);

    const ops = await operator.newPage();
    await ops.setViewportSize(phone);
    const [run] = ((await (await ops.request.get(`${server.baseUrl}/api/threads/${threadId}`)).json()) as { runs: { id: string }[] }).runs;
    await open(ops, `${server.baseUrl}/ops?run=${run!.id}`);
    await ops.getByTestId('run-detail').waitFor();
    await ops.getByTestId('segments').waitFor();
    expect(await overflow(ops), 'the operator page is wider than the screen').toBeLessThanOrEqual(0);
    // The tables are all there, to scroll sideways within their box.
    const runs = ops.getByTestId('runs');
    expect(await runs.evaluate((table) => table.scrollWidth > table.parentElement!.clientWidth)).toBe(true);
    await chat.close();
    await ops.close();
  });
});
