// The composer and the edit box in headless Chromium, where a hurried or unlucky writer loses
// text (found by an outsider's trial): Enter pressed while the message before is still on its
// way, an edit box left open while the thread goes on, a paste past the length limit, a message
// of invisible characters, and an approval asked while an operator holds the run.
import type { Browser, BrowserContext, Page, Route } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  announcementsSaid, createTestStore, hasChromium, launchBrowser, open, printServerOutputOnFailure, recordAnnouncements, sendChat,
  signIn, skipReason, startServer, waitForRunStatus, type AppServer, type TestStore,
} from './harness';

const userMessages = (page: Page) => page.getByTestId('user-message').allTextContents();

describe.skipIf(!hasChromium)(`the composer${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;
  let alice: BrowserContext;

  beforeAll(async () => {
    store = await createTestStore();
    server = await startServer({ store, env: { AGENT_KIT_SCRIPTED_TOKENS: '8', AGENT_KIT_SCRIPTED_DELAY_MS: '20' } });
    browser = await launchBrowser();
    alice = await signIn(browser, server.baseUrl, 'alice');
  });

  printServerOutputOnFailure(() => server);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await store?.dispose();
  });

  /** A thread with one answered message, open in a new page. */
  async function answeredThread(first: string): Promise<{ page: Page; threadId: string }> {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const threadId = await sendChat(page, first);
    await waitForRunStatus(page, 'completed');
    return { page, threadId };
  }

  /**
   * The server answers no message of the page's until the returned function is called, as on a
   * network slower than the writer: what they type meanwhile is there before the first answer.
   * Then each goes on as `answered` says (to the server, by default).
   */
  async function holdSends(page: Page, answered: (route: Route) => Promise<void> = (route) => route.continue()): Promise<() => void> {
    let answer!: () => void;
    const held = new Promise<void>((resolve) => (answer = resolve));
    await page.route('**/api/chat', async (route) => {
      await held;
      await answered(route);
    });
    return answer;
  }

  it('sends each message ended with Enter while the one before was on its way, in order and apart', async () => {
    const { page } = await answeredThread(`hurry ${Date.now()}`);
    const answer = await holdSends(page);
    const box = page.getByRole('textbox', { name: 'Message', exact: true });
    await box.focus();
    for (const text of ['q-one', 'q-two', 'q-three']) {
      await page.keyboard.type(text, { delay: 10 });
      await page.keyboard.press('Enter');
    }
    // Listed under the composer while they wait (before: the second Enter was ignored, and
    // "q-twoq-three" was sent as one message).
    await expect.poll(() => page.getByTestId('queued').locator('li').allTextContents()).toEqual(['Next: q-two', 'Next: q-three']);
    answer();
    await expect.poll(() => userMessages(page), { timeout: 30_000 }).toEqual([expect.any(String), 'q-one', 'q-two', 'q-three']);
    await expect.poll(() => box.inputValue(), { timeout: 10_000 }).toBe('');
    expect(await page.getByTestId('queued').count()).toBe(0);
    await page.close();
  });

  it('sends them apart on a new conversation too, from its own page', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const answer = await holdSends(page);
    const box = page.getByRole('textbox', { name: 'Message', exact: true });
    await box.focus();
    const first = `new one ${Date.now()}`;
    for (const text of [first, 'then two', 'then three']) {
      await page.keyboard.type(text, { delay: 10 });
      await page.keyboard.press('Enter');
    }
    await expect.poll(() => page.getByTestId('queued').locator('li').allTextContents()).toEqual(['Next: then two', 'Next: then three']);
    answer();
    await page.waitForURL(/\/t\/[0-9a-f-]{36}$/);
    await expect.poll(() => userMessages(page), { timeout: 30_000 }).toEqual([first, 'then two', 'then three']);
    await expect.poll(() => box.inputValue(), { timeout: 10_000 }).toBe('');
    await page.close();
  });

  /**
   * A new conversation whose first message has arrived, the page on its way to the thread's URL:
   * the thread's page data is held for two seconds, as on a slow network, then `loaded` (read,
   * or refused). Resolves with the composer, focused, as the page asks for that data.
   */
  async function movingToNewThread(first: string, loaded: (route: Route) => Promise<void>) {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const threadData = /\/t\/[0-9a-f-]{36}\/__data\.json/;
    const asked = page.waitForRequest(threadData);
    await page.route(threadData, async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      await loaded(route);
    });
    const box = page.getByRole('textbox', { name: 'Message', exact: true });
    await box.focus();
    await page.keyboard.type(first, { delay: 5 });
    await page.keyboard.press('Enter');
    await asked;
    return { page, box };
  }

  it('sends a message ended with Enter after the first arrived and before the new conversation\'s page has loaded', async () => {
    const first = `on its way ${Date.now()}`;
    const { page, box } = await movingToNewThread(first, (route) => route.continue());
    await page.keyboard.type('sent meanwhile', { delay: 5 });
    await page.keyboard.press('Enter');
    // Listed under the composer until the thread's page sends it (before: the Enter was ignored,
    // and the text stayed in the composer).
    await expect.poll(() => page.getByTestId('queued').locator('li').allTextContents()).toEqual(['Next: sent meanwhile']);
    await page.waitForURL(/\/t\/[0-9a-f-]{36}$/);
    await expect.poll(() => userMessages(page), { timeout: 30_000 }).toEqual([first, 'sent meanwhile']);
    await expect.poll(() => box.inputValue(), { timeout: 10_000 }).toBe('');
    expect(await page.getByTestId('queued').count()).toBe(0);
    await page.close();
  });

  it('keeps what the writer typed meanwhile when the new conversation\'s page comes by a whole load', async () => {
    // The thread's page data cannot be read: SvelteKit loads the page whole, which starts it afresh.
    const first = `reloaded ${Date.now()}`;
    const { page, box } = await movingToNewThread(first, (route) => route.abort());
    await page.keyboard.type('queued one', { delay: 5 });
    await page.keyboard.press('Enter');
    await page.keyboard.type('still a draft', { delay: 5 });
    await page.waitForURL(/\/t\/[0-9a-f-]{36}$/);
    // In the composer, in the order typed (before: both were lost with the page).
    await expect.poll(() => box.inputValue(), { timeout: 10_000 }).toBe('queued one\nstill a draft');
    // Not sent: the thread shows its first message, replayed from its log after the page mounts
    // (so polled), and still that alone once its turn is over.
    await expect.poll(() => userMessages(page), { timeout: 30_000 }).toEqual([first]);
    await waitForRunStatus(page, 'completed');
    expect(await userMessages(page)).toEqual([first]);
    expect(await box.inputValue()).toBe('queued one\nstill a draft');
    await page.close();
  });

  it('keeps a draft and what was queued across a reload, but not the message on its way', async () => {
    const first = `reload ${Date.now()}`;
    const { page } = await answeredThread(first);
    // The server gets each message; the page never gets its answer, as when the reload cuts it.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    await page.route('**/api/chat', async (route) => {
      const response = await route.fetch();
      await released;
      await route.fulfill({ response }).catch(() => {}); // the page that asked is gone
    });
    const box = page.getByRole('textbox', { name: 'Message', exact: true });
    await box.focus();
    for (const text of ['on its way', 'queued next']) {
      await page.keyboard.type(text, { delay: 5 });
      await page.keyboard.press('Enter');
    }
    await page.keyboard.type('half typed', { delay: 5 });
    await expect.poll(() => page.getByTestId('queued').locator('li').allTextContents()).toEqual(['Next: queued next']);
    await expect.poll(() => userMessages(page), { timeout: 30_000 }).toEqual([first, 'on its way']);
    await page.reload();
    // What was not sent is in the composer, in the order typed (before: lost with the page); the
    // message that arrived is in the thread, not in the composer to be sent twice.
    await expect.poll(() => box.inputValue(), { timeout: 10_000 }).toBe('queued next\nhalf typed');
    await expect.poll(() => userMessages(page), { timeout: 30_000 }).toEqual([first, 'on its way']);
    // Kept once: the composer emptied, the next reload brings nothing back.
    await box.fill('');
    release();
    await page.unroute('**/api/chat');
    await page.reload();
    await expect.poll(() => userMessages(page), { timeout: 30_000 }).toEqual([first, 'on its way']);
    expect(await box.inputValue()).toBe('');
    await page.close();
  });

  it('puts what was queued back in the composer when a send fails', async () => {
    const { page } = await answeredThread(`fail ${Date.now()}`);
    const answer = await holdSends(page, (route) => route.fulfill({
      status: 503, contentType: 'application/json', body: JSON.stringify({ error: { code: 'UNAVAILABLE', message: 'down for a moment' } }),
    }));
    const box = page.getByRole('textbox', { name: 'Message', exact: true });
    await box.focus();
    for (const text of ['lost one', 'lost two']) {
      await page.keyboard.type(text, { delay: 10 });
      await page.keyboard.press('Enter');
    }
    await expect.poll(() => page.getByTestId('queued').locator('li').allTextContents()).toEqual(['Next: lost two']);
    answer();
    await expect.poll(() => box.inputValue(), { timeout: 15_000 }).toBe('lost one\nlost two');
    expect(await page.getByTestId('queued').count()).toBe(0);
    await page.close();
  });

  it('closes an edit box the thread went on past, keeping its text, so sending it cannot drop a later turn', async () => {
    const first = `edit later ${Date.now()}`;
    const { page } = await answeredThread(first);
    await page.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('textbox', { name: 'Edit message' });
    await edit.fill(`${first}, edited`);
    await recordAnnouncements(page);
    // The writer goes on in the composer instead, and sends a second message.
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('second question');
    await page.getByRole('button', { name: 'Send', exact: true }).last().click();
    await waitForRunStatus(page, 'completed');
    await expect.poll(() => edit.count()).toBe(0);
    // (A draft in the composer would have kept the edit too, on a line of its own after it.)
    expect(await announcementsSaid(page)).toContain('The edit was closed: the conversation went on after that message.');
    expect(await page.getByRole('textbox', { name: 'Message', exact: true }).inputValue()).toBe(`${first}, edited`);
    expect(await userMessages(page)).toEqual([first, 'second question']);
    await page.close();
  });

  it('says how much of the limit a long draft uses, and that a paste past it was cut', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const box = page.getByRole('textbox', { name: 'Message', exact: true });
    await box.fill('x'.repeat(20_000));
    expect(await page.getByTestId('length-left').count()).toBe(0);
    await box.press('End');
    await page.evaluate(() => {
      const data = new DataTransfer();
      data.setData('text/plain', 'y'.repeat(20_000));
      document.querySelector('textarea[name="message"]')!.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
    });
    await box.fill('x'.repeat(32_000)); // what the browser's paste leaves: the text up to the limit
    await expect.poll(() => page.getByTestId('length-left').textContent())
      .toBe('32,000 of 32,000 characters: the pasted text was cut there');
    await box.fill('short');
    await expect.poll(() => page.getByTestId('length-left').count()).toBe(0);
    await page.close();
  });

  it('does not send a message of invisible characters only', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('\u200b\u200d\u2060');
    expect(await page.getByRole('button', { name: 'Send' }).isDisabled()).toBe(true);
    await page.close();
  });

  it('keeps an approval from being answered while an operator holds the run, and offers it again on release', async () => {
    const { page } = await answeredThread(`warm up ${Date.now()}`);
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('pay it #approve');
    await page.getByRole('button', { name: 'Send' }).click();
    await waitForRunStatus(page, 'waiting_input');
    const runId = (await page.getByTestId('run').last().getAttribute('data-run-id'))!;
    const operator = await signIn(browser, server.baseUrl, 'operator');
    const act = async (action: string) =>
      expect((await operator.request.post(`${server.baseUrl}/api/runs/${runId}/${action}`, { data: {} })).status()).toBe(200);
    await act('takeover');
    await waitForRunStatus(page, 'waiting_takeover');
    const approve = page.getByRole('button', { name: 'Approve' });
    expect(await approve.isDisabled()).toBe(true);
    expect(await page.getByTestId('held-note').textContent()).toContain('An operator is handling this reply');
    await act('release');
    await waitForRunStatus(page, 'waiting_input');
    await expect.poll(() => approve.isDisabled()).toBe(false);
    expect(await page.getByTestId('held-note').count()).toBe(0);
    await approve.click();
    await waitForRunStatus(page, 'completed');
    await operator.close();
    await page.close();
  });

  it('has the keyboard in the right place: the composer of a new conversation, the sign-in name, Escape out of an edit', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const focused = () => page.evaluate(() => document.activeElement?.getAttribute('aria-label') ?? document.activeElement?.id ?? '');
    await expect.poll(focused).toBe('Message');
    const visitor = await browser.newContext();
    const login = await visitor.newPage();
    await open(login, `${server.baseUrl}/login`);
    await expect.poll(() => login.evaluate(() => document.activeElement?.id)).toBe('name');
    await visitor.close();

    const first = `escape ${Date.now()}`;
    await sendChat(page, first);
    await waitForRunStatus(page, 'completed');
    await page.getByRole('button', { name: 'Edit' }).click();
    await expect.poll(focused).toBe('Edit message');
    await page.keyboard.press('Escape');
    await expect.poll(() => page.getByRole('textbox', { name: 'Edit message' }).count()).toBe(0);
    await expect.poll(focused).toBe('Message');
    expect(await userMessages(page)).toEqual([first]);
    await page.close();
  });

  it('lays a right-to-left message out right to left', async () => {
    const { page } = await answeredThread('\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd');
    const direction = (testId: string) => page.getByTestId(testId).first()
      .evaluate((el) => getComputedStyle(el).direction);
    expect(await direction('user-message')).toBe('rtl');
    expect(await direction('run-text')).toBe('ltr'); // the scripted model answers in English
    await page.close();
  });
});
