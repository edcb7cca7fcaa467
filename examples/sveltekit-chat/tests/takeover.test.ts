// Takeover, seen from the browser: the server process SIGKILLed mid-turn and started again on
// the same store finishes the same turn exactly once on the page; a SIGTERM lets the step finish
// first; and on the operator page the demo's "kill segment" expires the lease, a new segment
// (attempt 2) takes over and continues.
import { scriptedReplyText } from 'agent-kit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestStore, hasChromium, open, lastRunText, launchBrowser, saveScreenshot, sendChat, signIn, skipReason,
  printServerOutputOnFailure, startServer, waitForRunStatus, waitForWords, type AppServer, type TestStore,
} from './harness';

// 250 words at 60 ms: a 15 s turn, so a kill early in it leaves most of the turn to the takeover,
// and an operator page that opens slowly on a loaded machine still finds the run running (at
// 40 ms, CI once saw the kill button disabled: the turn had ended before the click).
const replyTokens = 250;
const serverEnv = { AGENT_KIT_SCRIPTED_TOKENS: String(replyTokens), AGENT_KIT_SCRIPTED_DELAY_MS: '60' };
const takeoverMaxMs = 40_000; // lease (5 s) + reaper poll + restart + the rest of the turn
const expectedReply = (text: string) => scriptedReplyText([text], replyTokens).trim();

interface ThreadDetail {
  messages: { role: string; text: string; partial: boolean }[];
  runs: { id: string; status: string; attempts: number; fence: number }[];
}

async function readThread(page: Page, baseUrl: string, threadId: string): Promise<ThreadDetail> {
  const response = await page.request.get(`${baseUrl}/api/threads/${threadId}`);
  expect(response.status()).toBe(200);
  return (await response.json()) as ThreadDetail;
}

describe.skipIf(!hasChromium)(`takeover in the browser${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;
  let alice: BrowserContext;

  beforeAll(async () => {
    store = await createTestStore();
    server = await startServer({ store, env: serverEnv });
    browser = await launchBrowser();
    alice = await signIn(browser, server.baseUrl, 'alice');
  });

  printServerOutputOnFailure(() => server);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await store?.dispose();
  });

  it('finishes a turn exactly once after the server is SIGKILLed mid-turn and restarted', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const message = 'Please survive a crash';
    const threadId = await sendChat(page, message);
    await waitForWords(page, 5);
    const port = Number(new URL(server.baseUrl).port);
    await server.kill();
    expect((await lastRunText(page)).trim().length).toBeLessThan(expectedReply(message).length);

    server = await startServer({ store, port, env: serverEnv });
    await waitForRunStatus(page, 'completed', takeoverMaxMs);
    expect((await lastRunText(page)).trim()).toBe(expectedReply(message));
    expect(await page.getByTestId('run').count()).toBe(1);
    expect(await page.getByTestId('user-message').count()).toBe(1);
    // Plain words for the person chatting; the attempt is on the element for the test.
    await expect(page.getByTestId('resumed').innerText()).resolves.toBe('resumed after an interruption');
    await expect(page.getByTestId('run').getAttribute('data-attempt')).resolves.toBe('2');

    const thread = await readThread(page, server.baseUrl, threadId);
    const answers = thread.messages.filter((m) => m.role === 'assistant');
    expect(answers).toHaveLength(1);
    expect(answers[0]!.partial).toBe(false);
    expect(answers[0]!.text.trim()).toBe(expectedReply(message));
    expect(thread.runs).toHaveLength(1);
    expect(thread.runs[0]).toMatchObject({ status: 'completed', attempts: 2, fence: 2 });
    await page.close();
  });

  it('on SIGTERM cuts a step longer than its grace and gives the run back, so the restarted server goes on at once', async () => {
    // The turn is one 15 s step. A platform kills a process some seconds after its SIGTERM, so
    // the step is cut after stopGraceMs (3 s) and the run queued with its text (ADR-0117): no
    // lease to wait out, no attempt spent. (It used to wait for the step, past any such grace.)
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const message = 'Finish before you go';
    const threadId = await sendChat(page, message);
    await waitForWords(page, 5);
    const port = Number(new URL(server.baseUrl).port);
    await server.stop();
    server = await startServer({ store, port, env: serverEnv });
    await waitForRunStatus(page, 'completed', takeoverMaxMs);
    expect((await lastRunText(page)).trim()).toBe(expectedReply(message));
    expect(await page.getByTestId('resumed').count()).toBe(0); // a hand-off, not a crash
    const thread = await readThread(page, server.baseUrl, threadId);
    expect(thread.messages.filter((m) => m.role === 'assistant')).toHaveLength(1);
    // A second segment (fence 2), on its first attempt: the first gave the run back (a crash's
    // takeover would be attempt 2; a step let finish, fence 1).
    expect(thread.runs[0]).toMatchObject({ status: 'completed', attempts: 1, fence: 2 });
    await page.close();
  });

  it("shows the run to the operator, and the demo's kill-segment makes attempt 2 take over", async () => {
    // The operator page is open before the turn starts, and the run is selected in place: the
    // kill follows the turn's first words by a poll of the page, not by a sign-in and a page
    // load. A kill in the turn's last second and a half can come too late to take effect (the
    // segment ends before its next renewal is refused), and a loaded CI machine once took that
    // long to open the page.
    const operator = await signIn(browser, server.baseUrl, 'operator');
    const ops = await operator.newPage();
    await open(ops, `${server.baseUrl}/ops`);
    const chat = await alice.newPage();
    await open(chat, `${server.baseUrl}/`);
    const message = 'Hello agent-kit #effect';
    const threadId = await sendChat(chat, message);
    await waitForWords(chat, 3);
    const [run] = (await readThread(chat, server.baseUrl, threadId)).runs;

    const row = ops.locator(`[data-testid="run-row"][data-run-id="${run!.id}"]`);
    await row.getByRole('link').first().click(); // listed by the page's next poll; selected without a page load
    await ops.waitForURL(`${server.baseUrl}/ops?run=${run!.id}`);
    await expect(row.getAttribute('data-status')).resolves.toBe('running');
    const kill = ops.getByRole('button', { name: 'Kill segment (demo)' });
    // The button is enabled while the run runs; say how the run stood if it no longer did.
    await kill.click({ timeout: 10_000 }).catch(async (error: unknown) => {
      const status = await row.getAttribute('data-status');
      const fence = await row.getAttribute('data-fence');
      throw new Error(`could not kill: the run is ${status} at fence ${fence} (${String(error).split('\n')[0]})`);
    });
    await ops.getByText('expired: watch the worker take over').waitFor();

    await waitForRunStatus(chat, 'completed', takeoverMaxMs);
    await expect(chat.getByTestId('resumed').innerText()).resolves.toBe('resumed after an interruption');
    await expect(chat.getByTestId('run').getAttribute('data-attempt')).resolves.toBe('2');
    expect((await lastRunText(chat)).trim()).toBe(expectedReply(message));
    await expect(chat.getByTestId('run').textContent()).resolves.toContain('record_effect → completed');

    await ops.locator(`[data-testid="run-row"][data-run-id="${run!.id}"][data-status="completed"]`).waitFor();
    expect(await row.getAttribute('data-fence')).toBe('2');
    const segments = ops.getByTestId('segment');
    await segments.nth(1).waitFor();
    expect(await segments.count()).toBe(2);
    // The kill is marked as such: it was drawn "lost", like a process that died on its own.
    expect(await segments.nth(0).getAttribute('data-ended')).toBe('killed');
    expect(await segments.nth(0).getByTestId('kill-marker').count()).toBe(1);
    await expect(ops.getByTestId('segment-row').first().innerText()).resolves.toContain('killed: by operator (demo)');
    // The polled table can say completed before the streamed timeline has the close event.
    await expect.poll(() => segments.nth(1).getAttribute('data-ended'), { timeout: 10_000 }).toBe('closed');
    const ledger = ops.getByTestId('effects');
    await expect(ledger.textContent()).resolves.toContain('record_effect');
    await expect(ledger.textContent()).resolves.toContain('completed');
    await ops.waitForTimeout(300); // let the countdown and timeline settle for the picture
    await saveScreenshot(ops, 'operator.png');
    await saveScreenshot(chat, 'chat.png');
    await operator.close();
    await chat.close();
  });
  /** A turn sent from a chat page, a few words into its reply, and its run opened on the operator page. */
  async function replyingTurnOnOpsPage(message: string) {
    const chat = await alice.newPage();
    await open(chat, `${server.baseUrl}/`);
    const threadId = await sendChat(chat, message);
    await waitForWords(chat, 3);
    const [run] = (await readThread(chat, server.baseUrl, threadId)).runs;
    const operator = await signIn(browser, server.baseUrl, 'operator');
    const ops = await operator.newPage();
    await open(ops, `${server.baseUrl}/ops?run=${run!.id}`);
    return { chat, threadId, operator, ops };
  }

  it('lets an operator take a running turn over and write its reply, which the chat shows as the answer', async () => {
    const { chat, threadId, operator, ops } = await replyingTurnOnOpsPage(`a person, please ${Date.now()}`);
    const replyBox = ops.getByRole('textbox', { name: "Reply in the assistant's place" });
    expect(await replyBox.count()).toBe(0); // only once the run is held
    await ops.getByRole('button', { name: 'Take over' }).click();
    await waitForRunStatus(chat, 'waiting_takeover');
    await replyBox.waitFor();
    const send = ops.getByRole('button', { name: 'Send reply' });
    await replyBox.fill(' \u200b ');
    expect(await send.isDisabled()).toBe(true); // blank
    await replyBox.fill('Your order ships today. — Olga');
    await send.click();
    await ops.getByText('Replied: the run is completed').waitFor();
    await waitForRunStatus(chat, 'completed');
    expect((await lastRunText(chat)).trim()).toBe('Your order ships today. — Olga');
    await expect(chat.getByTestId('run-badge').textContent()).resolves.toBe('answered by an operator');
    await expect.poll(() => replyBox.count(), { timeout: 5_000 }).toBe(0); // closed: nothing more to write
    // Opened afresh, the thread shows the same answer, once.
    const again = await alice.newPage();
    await open(again, `${server.baseUrl}/t/${threadId}`);
    await waitForRunStatus(again, 'completed');
    expect((await lastRunText(again)).trim()).toBe('Your order ships today. — Olga');
    const thread = await readThread(chat, server.baseUrl, threadId);
    expect(thread.messages.filter((m) => m.role === 'assistant').map((m) => m.text)).toEqual(['Your order ships today. — Olga']);
    await operator.close();
    await again.close();
    await chat.close();
  });

  it('lets an operator take a running turn over and release it, and the turn then finishes', async () => {
    const message = `hold on ${Date.now()}`;
    const { chat, threadId, operator, ops } = await replyingTurnOnOpsPage(message);
    await ops.getByRole('button', { name: 'Take over' }).click();
    await waitForRunStatus(chat, 'waiting_takeover');
    await expect(chat.getByTestId('run-badge').textContent()).resolves.toBe('held by an operator');
    // The page's note of the request goes once the run is held, the status saying so (it stayed).
    await ops.getByText('Takeover requested: the run parks').waitFor({ state: 'detached', timeout: 5_000 });
    const heldText = await lastRunText(chat);
    expect(heldText.trim().length).toBeLessThan(expectedReply(message).length);

    await ops.getByRole('button', { name: 'Release' }).click();
    await waitForRunStatus(chat, 'completed', takeoverMaxMs);
    expect((await lastRunText(chat)).trim()).toBe(expectedReply(message));
    await ops.getByText('Released: the run is queued').waitFor({ state: 'detached', timeout: 5_000 });
    const thread = await readThread(chat, server.baseUrl, threadId);
    expect(thread.messages.filter((m) => m.role === 'assistant')).toHaveLength(1);
    await operator.close();
    await chat.close();
  });
});
