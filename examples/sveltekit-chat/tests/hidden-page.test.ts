// A page out of view (a tab behind another, a minimised window) holds no stream and polls nothing
// (ADR-0099); shown again, it reads on and catches up. The chat page and the operator page in
// Chromium. Hidden is what the page is told: `document.hidden` and a `visibilitychange` event.
import { scriptedReplyText } from 'agent-kit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestStore, hasChromium, launchBrowser, open, printServerOutputOnFailure, sendChat, signIn, skipReason,
  startServer, waitForRunStatus, type AppServer, type TestStore,
} from './harness';
import { setHidden } from '../../../packages/agent-kit/test/harness/page-visibility';

const replyTokens = 8;

/** The page's requests that `matches`, as sent, and how many of them have ended (finished, failed or aborted). */
function requestsOf(page: Page, matches: (url: URL) => boolean) {
  const sent: URL[] = [];
  let ended = 0;
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (matches(url)) sent.push(url);
  });
  const end = (request: { url(): string }) => {
    if (matches(new URL(request.url()))) ended += 1;
  };
  page.on('requestfinished', end);
  page.on('requestfailed', end);
  return { sent, open: () => sent.length - ended };
}

/** The thread's last event, as its read says. */
async function lastSeq(page: Page, threadId: string): Promise<number> {
  const response = await page.request.get(new URL(`/api/threads/${threadId}`, page.url()).href);
  return ((await response.json()) as { thread: { lastSeq: number } }).thread.lastSeq;
}

async function until(done: () => Promise<boolean> | boolean, timeoutMs: number, why: () => string | Promise<string>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(await why());
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.skipIf(!hasChromium)(`a hidden page${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;
  let alice: BrowserContext;
  let operator: BrowserContext;

  beforeAll(async () => {
    store = await createTestStore();
    server = await startServer({ store, env: { AGENT_KIT_SCRIPTED_TOKENS: String(replyTokens), AGENT_KIT_SCRIPTED_DELAY_MS: '20' } });
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

  it("holds no stream of its thread on the chat page, and shown again shows the turn another tab sent meanwhile", async () => {
    const page = await alice.newPage();
    const events = requestsOf(page, (url) => /^\/api\/threads\/[^/]+\/events$/.test(url.pathname)); // (one thread: this page's)
    await open(page, `${server.baseUrl}/`);
    const threadId = await sendChat(page, 'before hiding');
    await waitForRunStatus(page, 'completed');
    await until(() => events.open() === 1, 10_000, () => `the page follows its thread in ${events.open()} streams`);

    const seqWhenHidden = await lastSeq(page, threadId);
    await setHidden(page, true);
    await until(() => events.open() === 0, 5_000, () => 'the hidden page kept its stream of the thread open');
    const sentWhileShown = events.sent.length;
    const second = await alice.newPage();
    await open(second, `${server.baseUrl}/t/${threadId}`);
    const message = 'sent while the first tab was hidden';
    await sendChat(second, message);
    await second.getByTestId('run').nth(1).waitFor();
    await waitForRunStatus(second, 'completed');
    await page.waitForTimeout(1_000); // time a live stream would have shown it in
    expect(events.sent.length, 'the hidden page read its thread').toBe(sentWhileShown);
    expect(await page.getByTestId('user-message').allTextContents()).toEqual(['before hiding']);

    await setHidden(page, false);
    await page.getByTestId('user-message').filter({ hasText: message }).waitFor({ timeout: 10_000 });
    await waitForRunStatus(page, 'completed');
    expect(await page.getByTestId('user-message').allTextContents()).toEqual(['before hiding', message]);
    expect((await page.getByTestId('run-text').last().textContent())?.trim())
      .toBe(scriptedReplyText(['before hiding', message], replyTokens).trim());
    // It read on from the last event it had, not the thread again from its start.
    expect(events.sent.map((url) => url.pathname)).toEqual(events.sent.map(() => `/api/threads/${threadId}/events`));
    expect(events.sent[sentWhileShown]!.searchParams.get('after')).toBe(String(seqWhenHidden));
    await second.close();
    await page.close();
  });

  it('connects again at once when the browser says it is back online, from the last event it applied', async () => {
    // A phone that changed networks keeps a stream that may be dead without a word; waiting for
    // 35 s of silence left its reply frozen that long.
    const page = await alice.newPage();
    const events = requestsOf(page, (url) => /^\/api\/threads\/[^/]+\/events$/.test(url.pathname));
    await open(page, `${server.baseUrl}/`);
    const threadId = await sendChat(page, 'before the network changed');
    await waitForRunStatus(page, 'completed');
    await until(() => events.open() === 1, 10_000, () => `the page follows its thread in ${events.open()} streams`);
    const seq = await lastSeq(page, threadId);
    const sentBefore = events.sent.length;

    await page.evaluate(() => window.dispatchEvent(new Event('online')));
    await until(() => events.sent.length === sentBefore + 1 && events.open() === 1, 3_000,
      () => `back online: ${events.sent.length - sentBefore} streams started, ${events.open()} open`);
    expect(events.sent[sentBefore]!.searchParams.get('after')).toBe(String(seq));
    // And the new stream is live: a message from another tab shows.
    const second = await alice.newPage();
    await open(second, `${server.baseUrl}/t/${threadId}`);
    await sendChat(second, 'after the network changed');
    await page.getByTestId('user-message').filter({ hasText: 'after the network changed' }).waitFor({ timeout: 10_000 });
    await second.close();
    await page.close();
  });

  it("polls nothing on the operator page and holds no stream of the run's thread; shown again, it reads at once", async () => {
    const chat = await alice.newPage();
    await open(chat, `${server.baseUrl}/`);
    const threadId = await sendChat(chat, 'a turn for the operator');
    await waitForRunStatus(chat, 'completed');
    const runId = ((await (await chat.request.get(`${server.baseUrl}/api/threads/${threadId}`)).json()) as { runs: { id: string }[] }).runs[0]!.id;
    await chat.close();

    const page = await operator.newPage();
    const polls = requestsOf(page, (url) => url.pathname === '/api/runs');
    const events = requestsOf(page, (url) => url.pathname === `/api/threads/${threadId}/events`);
    await open(page, `${server.baseUrl}/ops?run=${runId}`);
    await page.getByTestId('segment').first().waitFor();
    await until(() => polls.sent.length >= 2 && events.open() === 1, 10_000,
      () => `shown: ${polls.sent.length} polls, ${events.open()} streams of the run's thread`);

    const seqWhenHidden = await lastSeq(page, threadId);
    await setHidden(page, true);
    await until(() => events.open() === 0 && polls.open() === 0, 5_000,
      () => `hidden: ${events.open()} streams and ${polls.open()} polls still open`);
    const [pollsShown, streamsShown] = [polls.sent.length, events.sent.length];
    await page.waitForTimeout(2_500); // two polls and more, had it gone on
    expect([polls.sent.length, events.sent.length], 'the hidden operator page polled or streamed').toEqual([pollsShown, streamsShown]);

    await setHidden(page, false);
    await until(() => polls.sent.length > pollsShown && events.sent.length > streamsShown, 2_000,
      () => `shown again: ${polls.sent.length - pollsShown} polls, ${events.sent.length - streamsShown} streams`);
    await page.waitForTimeout(2_500);
    expect(polls.sent.length - pollsShown, 'shown again, it polls every second again').toBeGreaterThanOrEqual(2);
    // The timeline reads on where it stopped: its segments stay, and the thread is not replayed from its start.
    expect(events.sent[streamsShown]!.searchParams.get('after')).toBe(String(seqWhenHidden));
    expect(await page.getByTestId('segment').count()).toBeGreaterThan(0);
    await page.close();
  });
});
