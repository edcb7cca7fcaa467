// The chat page in headless Chromium against the built app: sign-in, a streamed turn, a reload
// mid-turn, a reply that ends offline (the page and the draft kept), two tabs on one turn, a
// question answered in the page, an approval, a reply regenerated and a message edited, and
// another user's thread refused. Expected replies come from the scripted model's own function.
import { scriptedAskQuestion, scriptedReplyText } from 'agent-kit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  announcementsSaid, createTestStore, hasChromium, open, reload, lastRunText, launchBrowser, recordAnnouncements, recordRetryNotices,
  retryNoticesSeen, sendChat, signIn, skipReason, printServerOutputOnFailure, startServer, waitForAnnouncement, waitForRunStatus,
  waitForWords, type AppServer, type TestStore,
} from './harness';

// 100 words at 40 ms each: a 4 s turn, long enough to reload or open a second tab mid-turn.
const replyTokens = 100;
const expectedReply = (text: string) => scriptedReplyText([text], replyTokens).trim();

/** Records the page's scrolls (ms since load, scrollTop, scrollHeight), this load's and every reload's. */
async function recordScrolls(page: Page): Promise<void> {
  await page.addInitScript(() => {
    const log: number[][] = [];
    (window as { scrollLog?: number[][] }).scrollLog = log;
    addEventListener('scroll', () => {
      const root = document.scrollingElement!;
      log.push([Math.round(performance.now()), Math.round(root.scrollTop), root.scrollHeight]);
    }, { passive: true });
  });
}

/**
 * Waits for the page to be scrolled to its end (within 2 px). Polled: the page follows in the
 * frame after a change, and a read between the two finds it short; on a loaded machine frames
 * come late. When it never gets there, the error says how far it was and what scrolled it.
 */
async function expectPageAtEnd(page: Page): Promise<void> {
  const gap = () => page.evaluate(() => {
    const root = document.scrollingElement!;
    return root.scrollHeight - root.scrollTop - root.clientHeight;
  });
  try {
    await expect.poll(gap, { timeout: 10_000, interval: 50 }).toBeLessThanOrEqual(2);
  } catch (error) {
    const scrolls = await page.evaluate(() => (window as { scrollLog?: number[][] }).scrollLog ?? []);
    throw new Error(`${(error as Error).message}\nthe page's scrolls since its load [ms, top, height]: ${JSON.stringify(scrolls)}`);
  }
}

describe.skipIf(!hasChromium)(`the chat page${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;
  let alice: BrowserContext;

  beforeAll(async () => {
    store = await createTestStore();
    server = await startServer({
      store, env: { AGENT_KIT_SCRIPTED_TOKENS: String(replyTokens), AGENT_KIT_SCRIPTED_DELAY_MS: '40' },
    });
    browser = await launchBrowser();
    alice = await signIn(browser, server.baseUrl, 'alice');
  });

  printServerOutputOnFailure(() => server);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await store?.dispose();
  });

  it('sends a signed-out visitor to the sign-in page', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await open(page, `${server.baseUrl}/`);
    expect(new URL(page.url()).pathname).toBe('/login');
    const api = await page.request.get(`${server.baseUrl}/api/threads`);
    expect(api.status()).toBe(401);
    await context.close();
  });

  it('streams a reply that grows word by word and ends with the full scripted text', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const message = `hello streaming ${Date.now()}`;
    await sendChat(page, message);
    const seenLengths = new Set<number>();
    while (!(await page.locator('[data-testid="run"][data-status="completed"]').count())) {
      seenLengths.add((await lastRunText(page)).length);
      await page.waitForTimeout(150);
    }
    const partialLengths = [...seenLengths].filter((length) => length > 0 && length < expectedReply(message).length);
    expect(partialLengths.length).toBeGreaterThanOrEqual(3);
    expect((await lastRunText(page)).trim()).toBe(expectedReply(message));
    await expect(page.getByTestId('user-message').textContent()).resolves.toBe(message);
    await page.close();
  });

  it('shows the same turn finish after a reload in the middle of it', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const message = `reload me ${Date.now()}`;
    const threadId = await sendChat(page, message);
    await waitForWords(page, 5);
    const before = await lastRunText(page);
    expect(before.trim().length).toBeLessThan(expectedReply(message).length);
    await reload(page);
    expect(page.url()).toContain(`/t/${threadId}`);
    await waitForRunStatus(page, 'completed');
    expect((await lastRunText(page)).trim()).toBe(expectedReply(message));
    expect(await page.getByTestId('run').count()).toBe(1);
    expect(await page.getByTestId('user-message').count()).toBe(1);
    await page.close();
  });

  it('lets two tabs watch one turn and both see the same final text', async () => {
    // The second tab opens the thread before the watched turn starts, so it must take the turn
    // from the live stream: opened mid-turn instead, a slow page load could see the turn finished
    // (the reload test covers joining mid-turn by replay).
    const first = await alice.newPage();
    await open(first, `${server.baseUrl}/`);
    const opening = `two tabs, first ${Date.now()}`;
    const threadId = await sendChat(first, opening);
    await waitForRunStatus(first, 'completed');
    const second = await alice.newPage();
    await open(second, `${server.baseUrl}/t/${threadId}`);
    await waitForRunStatus(second, 'completed');
    const message = `two tabs, watched ${Date.now()}`;
    await sendChat(first, message);
    await second.getByTestId('user-message').filter({ hasText: message }).waitFor();
    const completed = (page: typeof first) => page.locator('[data-testid="run"][data-status="completed"]');
    const seenLengths = new Set<number>();
    const deadline = Date.now() + 30_000;
    while ((await completed(second).count()) < 2 && Date.now() < deadline) {
      if ((await second.getByTestId('run').count()) === 2) seenLengths.add((await lastRunText(second)).length);
      await second.waitForTimeout(100);
    }
    const reply = scriptedReplyText([opening, message], replyTokens).trim();
    const partial = [...seenLengths].filter((length) => length > 0 && length < reply.length);
    expect(partial.length).toBeGreaterThanOrEqual(2);
    await Promise.all([completed(first).nth(1).waitFor(), completed(second).nth(1).waitFor()]);
    const [a, b] = [await lastRunText(first), await lastRunText(second)];
    expect(a.trim()).toBe(reply);
    expect(b).toBe(a);
    expect(await second.getByTestId('run').count()).toBe(2);
    await first.close();
    await second.close();
  });

  it('asks a question in the page and finishes the turn with the answer', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const message = `pick a colour #ask ${Date.now()}`;
    await sendChat(page, message);
    const request = page.getByTestId('input-request');
    await request.waitFor();
    await expect(request.textContent()).resolves.toContain(scriptedAskQuestion);
    await waitForRunStatus(page, 'waiting_input');
    await waitForAnnouncement(page, `Assistant asks: ${scriptedAskQuestion}`);
    // The field is named by the question it answers (a screen reader reads the question).
    await request.getByRole('textbox', { name: scriptedAskQuestion }).fill('blue');
    await request.getByRole('button', { name: 'Answer' }).click();
    await waitForRunStatus(page, 'completed');
    const run = page.getByTestId('run').last();
    await expect(run.textContent()).resolves.toContain('blue');
    await expect(run.textContent()).resolves.toContain('ask_user → answered');
    expect((await lastRunText(page)).trim().split(/\s+/)).toHaveLength(replyTokens);
    expect(await page.getByTestId('input-request').count()).toBe(0);
    // The answer started the run's second segment: that is the operator's business, not a tag
    // in the chat (it said "segment 2").
    await expect(run.locator('header').innerText()).resolves.toBe('assistant');
    await page.close();
  });

  it('reaches a new thread\'s page when its turn parks before that page has loaded', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    // The thread page's data comes late (a loaded server): the turn's question arrives first,
    // and the sidebar's refresh it starts must not cancel the move to the thread's URL.
    await page.route('**/t/*/__data.json*', async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await route.continue();
    });
    const threadId = await sendChat(page, `slow page #ask ${Date.now()}`);
    await page.getByTestId('input-request').waitFor();
    await waitForRunStatus(page, 'waiting_input');
    // The composer is open again on the thread's page, and what is sent from it joins the thread.
    const composer = page.getByRole('textbox', { name: 'Message' });
    await composer.fill('green');
    await page.getByRole('button', { name: 'Send' }).click();
    await waitForRunStatus(page, 'completed');
    expect(page.url()).toBe(`${server.baseUrl}/t/${threadId}`);
    await expect(page.getByTestId('run').last().textContent()).resolves.toContain('green');
    await page.close();
  });

  it('asks for approval, runs the tool once approved and records its effect', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await sendChat(page, `send the money #approve ${Date.now()}`);
    const request = page.getByTestId('input-request');
    await request.getByRole('button', { name: 'Approve' }).click();
    await waitForRunStatus(page, 'completed');
    await expect(page.getByTestId('run').last().textContent()).resolves.toContain('transfer_funds → completed');
    await page.close();
  });

  it('says on its Send button that a typed reply other than a plain yes denies the approval', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await sendChat(page, `pay it #approve ${Date.now()}`);
    await page.getByTestId('input-request').waitFor();
    await waitForRunStatus(page, 'waiting_input');
    const composer = page.getByRole('textbox', { name: 'Message' });
    // "sure" reads like a yes and denies the tool call (the placeholder alone said so, before
    // anything was typed): the button says so while it is in the box.
    await composer.fill('sure');
    await page.getByRole('button', { name: 'Send and deny' }).waitFor();
    await expect(page.locator('#composer-keys').textContent()).resolves.toContain('this denies the tool call');
    await composer.fill('Yes!');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await waitForRunStatus(page, 'completed');
    await expect(page.getByTestId('run').last().textContent()).resolves.toContain('transfer_funds → completed');
    // With no approval waiting, a "sure" is just a message.
    await composer.fill('sure');
    await page.getByRole('button', { name: 'Send', exact: true }).waitFor();
    await page.close();
  });

  it('cancels a running turn from the page and marks it cancelled', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const message = `cancel me ${Date.now()}`;
    await sendChat(page, message);
    await waitForWords(page, 3);
    const cancel = page.getByTestId('run').getByRole('button', { name: 'Cancel' });
    // It stays where it is while the reply grows (it moved down a line with each line of text).
    const fromTop = async () => (await cancel.boundingBox())!.y - (await page.getByTestId('run').boundingBox())!.y;
    const before = await fromTop();
    await waitForWords(page, 40);
    expect(await fromTop()).toBe(before);
    await cancel.click();
    await waitForRunStatus(page, 'aborted');
    await expect(page.getByTestId('run-badge').textContent()).resolves.toBe('cancelled');
    expect((await lastRunText(page)).trim().length).toBeLessThan(expectedReply(message).length);
    expect(await page.getByTestId('run').getByRole('button', { name: 'Cancel' }).count()).toBe(0);
    await page.close();
  });

  it('gives the focus back to the composer when Cancel or Regenerate, pressed from the keyboard, goes away', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await sendChat(page, `keyboard only ${Date.now()}`);
    await waitForWords(page, 3);
    const focusedName = () => page.evaluate(() => {
      const focused = document.activeElement;
      return focused === document.body || focused === null ? 'nothing' : focused.getAttribute('aria-label') ?? focused.textContent?.trim();
    });
    // The focus went to nowhere when the button it was on went away: a keyboard user was lost.
    await page.getByTestId('run').getByRole('button', { name: 'Cancel' }).focus();
    await page.keyboard.press('Enter');
    await waitForRunStatus(page, 'aborted');
    await expect.poll(focusedName).toBe('Message');
    await page.getByTestId('regenerate').focus();
    await page.keyboard.press('Enter');
    await waitForRunStatus(page, 'completed');
    await expect.poll(focusedName).toBe('Message');
    await page.close();
  });

  it('leaves the focus where it fell on a touch screen, where the composer\'s focus would open the keyboard', async () => {
    const touch = await signIn(browser, server.baseUrl, 'alice', { hasTouch: true });
    try {
      const page = await touch.newPage();
      await open(page, `${server.baseUrl}/`);
      expect(await page.evaluate(() => matchMedia('(pointer: coarse)').matches)).toBe(true);
      await sendChat(page, `touch only ${Date.now()}`);
      await waitForWords(page, 3);
      const cancel = page.getByTestId('run').getByRole('button', { name: 'Cancel' });
      await cancel.focus(); // as a tap does in Chromium; the keyboard test's way, so the two differ only in the screen
      await cancel.tap();
      await waitForRunStatus(page, 'aborted'); // the page's change after which a keyboard user's focus is moved
      await page.waitForTimeout(300);
      expect(await page.evaluate(() => document.activeElement === document.body)).toBe(true);
    } finally {
      await touch.close();
    }
  });

  it('regenerates a stopped reply: a new run streams in its place, in another tab and after a reload too', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const message = `regenerate me ${Date.now()}`;
    const threadId = await sendChat(page, message);
    await waitForWords(page, 3);
    await page.getByTestId('run').getByRole('button', { name: 'Cancel' }).click();
    await waitForRunStatus(page, 'aborted');
    const stopped = await page.getByTestId('run').getAttribute('data-run-id');
    const other = await alice.newPage();
    await open(other, `${server.baseUrl}/t/${threadId}`);
    await waitForRunStatus(other, 'aborted');

    await page.getByTestId('regenerate').click();
    const replaced = async (tab: typeof page) => {
      await tab.waitForFunction((old) => {
        const runs = document.querySelectorAll('[data-testid="run"]');
        return runs.length === 1 && runs[0]!.getAttribute('data-run-id') !== old && runs[0]!.getAttribute('data-status') === 'completed';
      }, stopped, { timeout: 20_000 });
      expect((await lastRunText(tab)).trim()).toBe(expectedReply(message));
      expect(await tab.getByTestId('user-message').allTextContents()).toEqual([message]);
      return tab.getByTestId('run').getAttribute('data-run-id');
    };
    const again = await replaced(page);
    expect(await replaced(other)).toBe(again);
    // The stopped reply it replaced, on request, as far as it had gone (asked again as it was).
    await other.getByTestId('show-earlier').click();
    const earlier = other.getByTestId('earlier-answer');
    await expect(earlier.locator('.label').textContent()).resolves.toBe('An earlier answer, replaced');
    const stoppedText = (await earlier.locator('.text').textContent())!.trim();
    expect(stoppedText.split(' ').length).toBeGreaterThanOrEqual(3);
    expect(expectedReply(message).startsWith(stoppedText)).toBe(true);
    await reload(page);
    expect(await replaced(page)).toBe(again);
    await page.close();
    await other.close();
  });

  /** A new thread's message, answered, then edited from the page: the edit's reply is under way. */
  async function answerThenEdit(page: Page, prefix: string) {
    await open(page, `${server.baseUrl}/`);
    const message = `${prefix} ${Date.now()}`;
    const threadId = await sendChat(page, message);
    await waitForRunStatus(page, 'completed');
    const first = await page.getByTestId('run').getAttribute('data-run-id');
    await page.getByRole('button', { name: 'Edit' }).click();
    const edited = `${message}, edited`;
    const box = page.getByRole('textbox', { name: 'Edit message' });
    // The box has the keyboard as it opens, and Enter sends it, as in the composer below it.
    await expect(box.evaluate((el) => el === document.activeElement)).resolves.toBe(true);
    await box.fill(edited);
    await box.press('Enter');
    return { threadId, message, edited, first };
  }

  it('edits the last message: the reply to the new text takes the old one\'s place, after a reload too, and shows it on request', async () => {
    const page = await alice.newPage();
    const { message, edited, first } = await answerThenEdit(page, 'edit me');
    const replaced = async () => {
      await page.waitForFunction((old) => {
        const runs = document.querySelectorAll('[data-testid="run"]');
        return runs.length === 1 && runs[0]!.getAttribute('data-run-id') !== old && runs[0]!.getAttribute('data-status') === 'completed';
      }, first, { timeout: 20_000 });
      expect(await page.getByTestId('user-message').allTextContents()).toEqual([edited]);
      expect((await lastRunText(page)).trim()).toBe(expectedReply(edited));
    };
    await replaced();
    // The answer it replaced, on request: as it was, to the message as it was.
    const showEarlier = async () => {
      await page.getByTestId('show-earlier').click();
      const earlier = page.getByTestId('earlier-answer');
      await expect(earlier.textContent()).resolves.toContain(`An earlier answer, replaced — to “${message}”`);
      expect((await earlier.locator('.text').textContent())?.trim()).toBe(expectedReply(message));
      expect(await page.getByTestId('show-earlier').count()).toBe(0); // it was the first answer
    };
    await showEarlier();
    await reload(page);
    await replaced();
    await showEarlier();
    await page.close();
  });

  it('puts an earlier answer back: the message and reply it had return, in another tab and after a reload too, and the newer one can come back', async () => {
    const page = await alice.newPage();
    const { threadId, message, edited, first } = await answerThenEdit(page, 'restore me');
    /** The tab shows one turn, of this run, ended, to this message: its run id. */
    const showsTurn = async (tab: Page, asked: string, notRun: string | null) => {
      await tab.waitForFunction(({ notRun, asked }) => {
        const runs = document.querySelectorAll('[data-testid="run"]');
        const users = document.querySelectorAll('[data-testid="user-message"]');
        return runs.length === 1 && runs[0]!.getAttribute('data-run-id') !== notRun && runs[0]!.getAttribute('data-status') === 'completed'
          && users.length === 1 && users[0]!.textContent === asked;
      }, { notRun, asked }, { timeout: 20_000 });
      expect((await lastRunText(tab)).trim()).toBe(expectedReply(asked));
      return tab.getByTestId('run').getAttribute('data-run-id');
    };
    const editRun = await showsTurn(page, edited, first);
    const other = await alice.newPage();
    await open(other, `${server.baseUrl}/t/${threadId}`);
    expect(await showsTurn(other, edited, null)).toBe(editRun);

    // The first answer, put back: it is the thread's again, here, in the other tab, after a reload.
    await page.getByTestId('show-earlier').click();
    await page.getByTestId('use-answer').click();
    expect(await showsTurn(page, message, editRun)).toBe(first);
    expect(await showsTurn(other, message, editRun)).toBe(first);
    await waitForAnnouncement(page, 'An earlier answer is back in the conversation.');
    await reload(page);
    expect(await showsTurn(page, message, editRun)).toBe(first);

    // The answer it replaced is on offer in its place, to the edit it answered, and comes back the same way.
    await other.getByTestId('show-earlier').click();
    const earlier = (tab: Page) => tab.getByTestId('earlier-answer');
    expect((await earlier(other).locator('.text').textContent())?.trim()).toBe(expectedReply(edited));
    await expect(earlier(other).locator('.label').textContent()).resolves.toBe(`An earlier answer, replaced — to “${edited}”`);
    await other.getByTestId('use-answer').click();
    expect(await showsTurn(other, edited, first)).toBe(editRun);
    expect(await showsTurn(page, edited, first)).toBe(editRun);
    await page.getByTestId('show-earlier').click();
    await expect(earlier(page).locator('.label').textContent()).resolves.toBe(`An earlier answer, replaced — to “${message}”`);
    expect((await earlier(page).locator('.text').textContent())?.trim()).toBe(expectedReply(message));
    // And the conversation goes on from the answer in it.
    const api = await page.request.get(`${server.baseUrl}/api/threads/${threadId}`);
    expect((await api.json()).runs.map((run: { id: string }) => run.id)).toEqual([editRun]);
    await page.close();
    await other.close();
  });

  it("refuses another user's thread as not found, in the page and in the API", async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const threadId = await sendChat(page, `private ${Date.now()}`);
    await waitForRunStatus(page, 'completed');
    await page.close();

    const bob = await signIn(browser, server.baseUrl, 'bob');
    const bobPage = await bob.newPage();
    const response = await open(bobPage, `${server.baseUrl}/t/${threadId}`);
    expect(response?.status()).toBe(404);
    expect(await bobPage.getByTestId('transcript').count()).toBe(0);
    for (const path of [`/api/threads/${threadId}`, `/api/threads/${threadId}/events`]) {
      expect((await bobPage.request.get(`${server.baseUrl}${path}`)).status()).toBe(404);
    }
    const list = (await (await bobPage.request.get(`${server.baseUrl}/api/threads`)).json()) as { threads: unknown[] };
    expect(list.threads).toEqual([]);
    const ops = await open(bobPage, `${server.baseUrl}/ops`);
    expect(ops?.status()).toBe(404);
    await bob.close();
  });

  it('keeps the page and the draft when a reply ends offline, and shows the next status once back', async () => {
    // The sidebar's run statuses are read again when a run of the open thread parks or closes. A
    // read that fails keeps the page; it used to invalidate the page's data, and a failed data
    // request sent the tab to the browser's error page.
    const dana = await signIn(browser, server.baseUrl, 'dana');
    const page = await dana.newPage();
    await open(page, `${server.baseUrl}/`);
    const message = `offline at the end ${Date.now()}`;
    const threadId = await sendChat(page, message);
    await page.waitForURL(`**/t/${threadId}`);
    await waitForWords(page, 3);
    const composer = page.getByRole('textbox', { name: 'Message' });
    await composer.fill('a draft typed meanwhile');
    await dana.setOffline(true); // new requests fail; the open event stream goes on
    await waitForRunStatus(page, 'completed');
    await page.waitForTimeout(1_500); // the sidebar's read comes 300 ms after the close, and fails
    expect(page.url()).toBe(`${server.baseUrl}/t/${threadId}`); // (was chrome-error://chromewebdata/)
    await expect(composer.inputValue()).resolves.toBe('a draft typed meanwhile');
    expect((await lastRunText(page)).trim()).toBe(expectedReply(message));

    await dana.setOffline(false);
    await composer.fill(`one question #ask ${Date.now()}`);
    await page.getByRole('button', { name: 'Send' }).click();
    await waitForRunStatus(page, 'waiting_input');
    const link = page.getByRole('navigation', { name: 'Threads' }).locator(`a[href="/t/${threadId}"]`);
    await link.getByText('waiting for you').waitFor({ timeout: 10_000 });
    await dana.close();
  });

  it('says so when the thread\'s stream is refused (the session ended elsewhere), with a way back', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const threadId = await sendChat(page, `refused later ${Date.now()}`);
    await waitForRunStatus(page, 'completed');
    // What the events route answers once the tab's session is gone (signed out in another tab).
    await page.route('**/api/threads/*/events*', (route) => route.fulfill({
      status: 401, contentType: 'application/json', body: '{"error":{"code":"UNAUTHENTICATED","message":"sign in"}}',
    }));
    await open(page, `${server.baseUrl}/t/${threadId}`);
    const alert = page.getByRole('alert').filter({ hasText: 'This thread stopped updating' });
    await alert.waitFor(); // (nothing was said: a reply under way stopped with its cursor blinking)
    await expect(alert.getByRole('link', { name: 'Reload' }).getAttribute('href')).resolves.toBe(`/t/${threadId}`);
    await page.close();
  });

  it('keeps one event stream across a run\'s close, its sidebar entry in step, and a long unbroken word inside the window', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    let streams = 0;
    page.on('request', (request) => {
      if (/\/api\/threads\/[^/]+\/events/.test(request.url())) streams++;
    });
    const threadId = await sendChat(page, `${'A'.repeat(3_000)} ${Date.now()}`);
    await page.waitForURL(`**/t/${threadId}`);
    const entry = page.getByRole('navigation', { name: 'Threads' }).locator(`a[href="/t/${threadId}"]`);
    await entry.getByText('replying').waitFor(); // as the thread's page read its list
    // The thread's own entry says so with the reply, in the same frame, not after the list is
    // read again (300 ms after the close).
    const entryWhenCompleted = await page.waitForFunction((href) => {
      const runs = document.querySelectorAll('[data-testid="run"]');
      if (runs[runs.length - 1]?.getAttribute('data-status') !== 'completed') return null;
      return document.querySelector(`nav a[href="${href}"]`)?.textContent ?? '';
    }, `/t/${threadId}`, { polling: 'raf' });
    expect(await entryWhenCompleted.jsonValue()).not.toMatch(/replying/);
    await page.waitForTimeout(1_500); // the sidebar's reload comes 300 ms after the close
    // The thread's page follows it with one stream. Before, the reload replaced the page's data
    // and the follower restarted its stream (2 here).
    expect(streams).toBe(1);
    const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, window: window.innerWidth }));
    expect(widths.page).toBeLessThanOrEqual(widths.window); // was ~40× the window
    await expect(page.getByRole('button', { name: 'Send' }).isVisible()).resolves.toBe(true);
    await page.close();
  });

  it('keeps the end of the thread in view: while a reply streams, and when the thread is opened', async () => {
    const page = await alice.newPage();
    await page.setViewportSize({ width: 900, height: 420 }); // two turns are taller than this
    await recordScrolls(page);
    await open(page, `${server.baseUrl}/`);
    await sendChat(page, `the first of two turns ${Date.now()}`);
    await waitForRunStatus(page, 'completed');
    await page.getByRole('textbox', { name: 'Message' }).fill('and the second');
    await page.getByRole('button', { name: 'Send' }).click();
    // Most of the second reply: the page is now taller than the window.
    await page.waitForFunction(() => (document.querySelectorAll('[data-testid="run-text"]')[1]?.textContent ?? '')
      .trim().split(/\s+/).filter(Boolean).length >= 60);
    expect(await page.evaluate(() => document.scrollingElement!.scrollHeight > window.innerHeight)).toBe(true);
    await expectPageAtEnd(page); // the reply was followed as it grew
    await waitForRunStatus(page, 'completed');
    await reload(page);
    await page.getByTestId('run').nth(1).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run-text"]')[1]?.textContent?.trim());
    await expectPageAtEnd(page); // was at the top: the thread opened at its first message
    await page.close();
  });

  it('leaves a reader who scrolled up where they are, and follows again once they are back at the end', async () => {
    const page = await alice.newPage();
    await page.setViewportSize({ width: 900, height: 420 });
    await recordScrolls(page);
    await open(page, `${server.baseUrl}/`);
    await sendChat(page, `scroll up while I answer ${Date.now()}`);
    await waitForRunStatus(page, 'completed');
    await page.getByRole('textbox', { name: 'Message' }).fill('and again');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByTestId('run').nth(1).waitFor();
    await waitForWords(page, 10);
    await page.mouse.move(450, 200);
    await page.mouse.wheel(0, -5_000); // the reader goes back to the first reply
    await expect.poll(() => page.evaluate(() => document.scrollingElement!.scrollTop)).toBe(0);
    await waitForWords(page, 40);
    expect(await page.evaluate(() => document.scrollingElement!.scrollTop)).toBe(0); // not pulled down
    expect(await page.evaluate(() => document.scrollingElement!.scrollHeight > window.innerHeight + 200)).toBe(true);
    await page.mouse.wheel(0, 20_000); // and comes back to the end while the reply still streams
    await waitForWords(page, 60);
    await expectPageAtEnd(page);
    await waitForRunStatus(page, 'completed');
    await expectPageAtEnd(page);
    await page.close();
  });

  it('announces how a turn goes in a status region, not the reply as it streams', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await recordAnnouncements(page);
    const liveRegions = () => page.getByTestId('transcript').evaluate((transcript) =>
      transcript.closest('[aria-live]') !== null || transcript.querySelector('[aria-live]') !== null);
    const message = `announce me ${Date.now()}`;
    await sendChat(page, message);
    await waitForWords(page, 5);
    // The transcript was aria-live="polite": the reply was read out token by token.
    expect(await liveRegions()).toBe(false);
    await expect(page.getByRole('status').filter({ hasText: 'Assistant is replying' }).count()).resolves.toBe(1);
    await waitForRunStatus(page, 'completed');
    await waitForAnnouncement(page, 'Assistant replied.');
    expect(await announcementsSaid(page)).toEqual(['Assistant is replying…', 'Assistant replied.']);
    // Opening the thread again replays its history: old news, so nothing is announced.
    await reload(page);
    await waitForRunStatus(page, 'completed');
    await page.waitForTimeout(500);
    await expect(page.getByTestId('announcer').textContent()).resolves.toBe('');
    await page.close();
  });

  it('says a message is queued while the reply before it runs, then how its own reply goes', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await recordAnnouncements(page);
    await sendChat(page, `the first of two ${Date.now()}`);
    await waitForWords(page, 3);
    await page.getByRole('textbox', { name: 'Message' }).fill('and the second');
    await page.getByRole('button', { name: 'Send' }).click();
    // Read in one go in the page: the sentence, while the second turn is still queued.
    const queued = 'Your message is queued; it will be answered after the current reply.';
    await page.waitForFunction((expected) => {
      const runs = document.querySelectorAll<HTMLElement>('[data-testid="run"]');
      const said = document.querySelector('[data-testid="announcer"]')?.textContent?.trim();
      return runs.length === 2 && runs[1]!.dataset.status === 'queued' && said === expected;
    }, queued);
    // Then the usual sentences: its own reply starts (cancelled, to keep the test short).
    const second = page.getByTestId('run').nth(1);
    await second.and(page.locator('[data-status="running"]')).waitFor();
    await waitForAnnouncement(page, 'Assistant is replying…');
    await second.getByRole('button', { name: 'Cancel' }).click();
    await waitForAnnouncement(page, 'Reply cancelled.');
    expect(await announcementsSaid(page)).toEqual([
      'Assistant is replying…', queued, 'Assistant replied.', 'Assistant is replying…', 'Reply cancelled.',
    ]);
    await page.close();
  });

  it('keeps the writer in the composer after a send, the first of a new thread included', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const composer = page.getByRole('textbox', { name: 'Message' });
    const composerHasFocus = () => page.waitForFunction(
      () => document.activeElement?.getAttribute('aria-label') === 'Message', undefined, { timeout: 5_000 },
    );
    await composer.click();
    await page.keyboard.type(`first by keyboard ${Date.now()}`);
    await page.keyboard.press('Enter');
    // The first message moves the page to the thread's URL; focus was left on the page's body.
    await page.waitForURL(/\/t\/[0-9a-f-]{36}$/);
    await composerHasFocus();
    await page.keyboard.type('typed straight on');
    await expect(composer.inputValue()).resolves.toBe('typed straight on');
    await waitForRunStatus(page, 'completed');
    // A later message sent with the mouse: focus comes back from the Send button.
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByTestId('user-message').nth(1).waitFor();
    await composerHasFocus();
    await page.close();
  });

  it('keeps what the writer types while their first message makes the thread and its page opens', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    // Hold the send, then the new thread's page data, each until the writer has typed on.
    const hold = async (url: string | RegExp) => {
      let release = () => {};
      const released = new Promise<void>((resolve) => (release = resolve));
      let arrived = () => {};
      const held = new Promise<void>((resolve) => (arrived = resolve));
      await page.route(url, async (route) => {
        arrived();
        await released;
        await route.continue();
      });
      return { held, release };
    };
    const send = await hold('**/api/chat');
    const threadPage = await hold(/\/t\/[0-9a-f-]{36}\/__data\.json/);
    const composer = page.getByRole('textbox', { name: 'Message' });
    await composer.click();
    await page.keyboard.type(`a new thread ${Date.now()}`);
    await page.keyboard.press('Enter');
    await send.held;
    await page.keyboard.type(' and a second thought'); // after the message sent: the composer still shows it
    send.release();
    await threadPage.held;
    // The server has the message: it leaves the composer, what was typed after it stays.
    await expect.poll(() => composer.inputValue(), { timeout: 10_000 }).toBe('and a second thought');
    await page.keyboard.type(', typed on');
    threadPage.release();
    await page.waitForURL(/\/t\/[0-9a-f-]{36}$/);
    // The thread's page mounts a new composer, which started empty: the typing was in the old one.
    await expect.poll(() => composer.inputValue(), { timeout: 10_000 }).toBe('and a second thought, typed on');
    await page.keyboard.type(' and on');
    await expect(composer.inputValue()).resolves.toBe('and a second thought, typed on and on');
    await page.close();
  });

  it('composes several lines: Shift+Enter breaks the line, Enter sends, the field grows to a limit', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const composer = page.getByRole('textbox', { name: 'Message' });
    expect(await composer.evaluate((field) => field.tagName)).toBe('TEXTAREA'); // was a one-line input
    const heightPx = async () => (await composer.boundingBox())!.height;
    const oneLinePx = await heightPx();
    await composer.click();
    await page.keyboard.type('first line');
    await page.keyboard.press('Shift+Enter');
    await page.keyboard.type('second line');
    expect(await composer.inputValue()).toBe('first line\nsecond line');
    expect(await heightPx()).toBeGreaterThan(oneLinePx);
    // The Enter that ends an IME composition commits the text; it must not send.
    await composer.evaluate((field) => field.dispatchEvent(new KeyboardEvent('keydown', {
      key: 'Enter', isComposing: true, bubbles: true, cancelable: true,
    })));
    await page.waitForTimeout(300);
    expect(new URL(page.url()).pathname).toBe('/');
    expect(await page.getByTestId('user-message').count()).toBe(0);
    // Thirty lines: it stops growing and scrolls instead of pushing the transcript away.
    await composer.fill(Array.from({ length: 30 }, (_, line) => `line ${line}`).join('\n'));
    const capped = await composer.evaluate((field) => ({ height: field.clientHeight, content: field.scrollHeight }));
    expect(capped.height).toBeLessThan(capped.content);
    expect(capped.height).toBeLessThanOrEqual(320);
    await composer.fill('first line\nsecond line');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/t\/[0-9a-f-]{36}$/);
    // The message keeps its line break on screen (innerText follows the rendering).
    await expect(page.getByTestId('user-message').innerText()).resolves.toBe('first line\nsecond line');
    expect(Math.abs((await heightPx()) - oneLinePx)).toBeLessThanOrEqual(1); // emptied, so one line again
    await page.close();
  });

  it('sends a page whose session ended in another tab to sign in, and back', async () => {
    const carol = await signIn(browser, server.baseUrl, 'carol');
    const page = await carol.newPage();
    await open(page, `${server.baseUrl}/`);
    const signedOut = await carol.request.post(`${server.baseUrl}/logout`, { maxRedirects: 0 });
    expect(signedOut.status()).toBe(303); // the other tab's sign-out: the context's cookie is gone
    await page.getByRole('textbox', { name: 'Message' }).fill('still there?');
    await page.getByRole('button', { name: 'Send' }).click();
    // Before: the page stayed and said "sign in to use this route", with no way there.
    await page.waitForURL(`${server.baseUrl}/login?next=%2F`);
    // The header no longer names the signed-out user (it offered "carol · Sign out" here).
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(0);
    await page.getByLabel('User name').fill('carol');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${server.baseUrl}/`);
    // Back with what they had written (it was gone), once the page has hydrated: its load event
    // can come before the app's modules mount it.
    await expect.poll(() => page.getByRole('textbox', { name: 'Message' }).inputValue(), { timeout: 5_000 }).toBe('still there?');
    await carol.close();
  });

  it('rejects a session cookie whose signature does not match', async () => {
    const [cookie] = await alice.cookies(server.baseUrl);
    expect(cookie?.name).toBe('ak_session');
    expect(cookie?.httpOnly).toBe(true);
    const [payload] = cookie!.value.split('.');
    const forged = Buffer.from(JSON.stringify({ sub: 'operator', exp: 4_102_444_800 })).toString('base64url');
    for (const value of [`${forged}.${cookie!.value.split('.')[1]}`, `${payload}.AAAA`, forged]) {
      const response = await fetch(`${server.baseUrl}/api/runs`, { headers: { cookie: `ak_session=${value}` } });
      expect(response.status).toBe(401);
    }
  });

  it('says the model is busy while the turn waits to ask it again, then streams the reply', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    // #busy: the scripted model refuses the request once, as a rate-limited provider does (429,
    // retry after 1 s); the turn waits and asks again instead of failing (ADR-0057).
    const message = `are you there #busy ${Date.now()}`;
    await recordRetryNotices(page);
    await sendChat(page, message);
    expect(await retryNoticesSeen(page)).toEqual([{ notice: "The model's provider is busy (429): trying again in 1 s (1 of 5).", text: '' }]);
    await waitForRunStatus(page, 'completed');
    expect(await page.getByTestId('model-retry').count()).toBe(0);
    expect((await lastRunText(page)).trim()).toBe(expectedReply(message));
    expect(await page.getByTestId('run').last().getAttribute('data-attempt')).toBe('1');
    await page.close();
  });

  it('says the model is busy when its reply is cut midway, then goes on from the same word', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    // #overload: the scripted model stops halfway with a 529 (retry after 1 s); the turn asks
    // again with the half as the reply's start, in the same segment (ADR-0059).
    const message = `go on #overload ${Date.now()}`;
    await recordRetryNotices(page);
    await sendChat(page, message);
    const half = expectedReply(message).split(' ').slice(0, replyTokens / 2).join(' ');
    // What it had is kept while it waits.
    expect(await retryNoticesSeen(page)).toEqual([{ notice: "The model's provider is busy (529): trying again in 1 s (1 of 5).", text: half }]);
    await waitForRunStatus(page, 'completed');
    expect(await page.getByTestId('model-retry').count()).toBe(0);
    expect((await lastRunText(page)).trim()).toBe(expectedReply(message));
    expect(await page.getByTestId('run').last().getAttribute('data-attempt')).toBe('1');
    await page.close();
  });
});
