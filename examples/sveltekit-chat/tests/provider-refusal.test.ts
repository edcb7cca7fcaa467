// A real provider refusing midway, seen in the browser: the app runs on the OpenAI-compatible
// provider against the library's local chat-completions stub, which fails the first reply after
// two words with OpenAI's `server_error`. The model cannot continue a prefill, so the segment
// asks again from the step's start (ADR-0061): the page drops the two words while it says the
// provider had an error and the reply is rewritten, then shows the whole reply once, on the run's
// first attempt. A request it rejects for good (a prompt past the context window, a 400) fails the
// turn at once, and the page says why (ADR-0066); the thread's next turn, past the window with
// that one in its history, is asked again without it and says so (ADR-0067). A reply the model's
// output limit cut says so under it (ADR-0068).
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contextLengthExceeded, startOpenAiStub, type OpenAiStub } from '../../../packages/agent-kit/test/harness/openai-stub';
import {
  createTestStore, hasChromium, lastRunText, launchBrowser, open, printServerOutputOnFailure, sendChat, signIn, skipReason,
  startServer, waitForRunStatus, type AppServer, type TestStore,
} from './harness';

describe.skipIf(!hasChromium)(`a provider refusing midway${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let stub: OpenAiStub;
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;
  let alice: BrowserContext;

  beforeAll(async () => {
    // The retried request is answered 4 s late: the wait stays on screen however late the page
    // subscribes (it replays the log, and shows the state the last event left).
    stub = await startOpenAiStub({ holdRetryMs: 4_000 });
    store = await createTestStore();
    server = await startServer({
      store, env: { AGENT_KIT_MODEL: 'openai-compatible:stub-model', OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' },
    });
    browser = await launchBrowser();
    alice = await signIn(browser, server.baseUrl, 'alice');
  });

  printServerOutputOnFailure(() => server);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await store?.dispose();
    await stub?.close();
  });

  it('drops the words of a reply cut by a server error, says it waits, then shows the reply from its start', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    // Every text the reply bubbles show, in order, from before the message is sent.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { seenTexts: string[] }).seenTexts = seen;
      new MutationObserver(() => {
        const texts = document.querySelectorAll('[data-testid="run-text"]');
        const text = texts[texts.length - 1]?.textContent ?? null;
        if (text !== null && seen.at(-1) !== text) seen.push(text);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    await sendChat(page, `a server error mid-reply ${Date.now()}`);
    // The wait (a backoff of 0.5-1 s): the notice is up and the cut words are gone.
    await page.waitForFunction(() => {
      const notice = document.querySelector('[data-testid="model-retry"]');
      const texts = document.querySelectorAll('[data-testid="run-text"]');
      return notice !== null && (texts[texts.length - 1]?.textContent ?? '') === '';
    }, undefined, { timeout: 20_000 });
    expect(await page.getByTestId('model-retry').textContent()).toMatch(
      /^The model's provider had an error \(500\): trying again in 1 s \(1 of 5\), rewriting the unfinished part of the reply\.$/);
    await waitForRunStatus(page, 'completed');
    expect(await lastRunText(page)).toBe('Hello from stub');
    const seen = await page.evaluate(() => (window as unknown as { seenTexts: string[] }).seenTexts);
    // Never the cut words and the reply together. (Whether the cut words were painted at all
    // depends on how the SSE reads fall: the words and the retry often arrive in one read.)
    expect(seen.filter((text) => text.includes('Hello fromHello'))).toEqual([]);
    expect(await page.getByTestId('run').last().getAttribute('data-attempt')).toBe('1');
    await page.close();
  });

  it('says why a turn failed when the provider rejected its request for good, on its first attempt', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await sendChat(page, `a message too long for the model ${Date.now()}`);
    await waitForRunStatus(page, 'failed');
    const run = page.getByTestId('run').last();
    expect(await run.getByTestId('run-badge').textContent()).toBe('failed');
    expect(await run.getByTestId('run-failure').textContent())
      .toBe(`The model's provider refused the request (400): ${contextLengthExceeded}`);
    expect(await run.getAttribute('data-attempt')).toBe('1');
    expect(stub.received.filter((r) => JSON.stringify(r.body.messages).includes('too long for the model'))).toHaveLength(1);

    // The thread's next turn carries that one in its history: refused, it is asked again at once
    // without it (ADR-0067), completes, and says what the model was not given.
    await sendChat(page, 'and now?');
    await waitForRunStatus(page, 'completed');
    const next = page.getByTestId('run').last();
    expect(await next.getByTestId('run-text').textContent()).toBe('Hello from stub');
    expect(await next.getByTestId('history-cut').textContent())
      .toBe('This conversation is longer than the model can take: it was not given the earlier turn.');
    expect(await next.getAttribute('data-attempt')).toBe('1');
    expect(await page.getByTestId('history-cut').count()).toBe(1); // not the failed turn's

    // The thread learned the model's window from that refusal: its next turn is cut before it is
    // sent, in one request, and says so the same way (ADR-0069).
    const requests = stub.received.length;
    await sendChat(page, 'and then?');
    await page.getByTestId('user-message').filter({ hasText: 'and then?' }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"][data-status="completed"]').length === 2,
      undefined, { timeout: 30_000 });
    const third = page.getByTestId('run').last();
    expect(await third.getByTestId('run-text').textContent()).toBe('Hello from stub');
    expect(await third.getByTestId('history-cut').textContent())
      .toBe('This conversation is longer than the model can take: it was given none of the 2 earlier turns.');
    expect(stub.received.length - requests).toBe(1);
    await page.close();
  });

  it("says under a reply that the model's output limit cut it", async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await sendChat(page, `tell me a long story ${Date.now()}`);
    await waitForRunStatus(page, 'completed');
    const run = page.getByTestId('run').last();
    expect(await run.getByTestId('run-text').textContent()).toBe('Hello from stub');
    const note = run.getByTestId('output-limit');
    expect((await note.textContent())?.trim()).toBe("The reply stops here: it reached the model's output limit. Continue");
    // Continue asks for the rest in a message of the writer's; only the last reply offers it.
    await note.getByRole('button', { name: 'Continue' }).click();
    await page.getByTestId('user-message').filter({ hasText: 'Continue.' }).waitFor();
    // Both replies completed (waitForRunStatus would find the first, completed already).
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"][data-status="completed"]').length === 2,
      undefined, { timeout: 30_000 });
    expect(await page.getByTestId('run').count()).toBe(2);
    expect(await page.getByTestId('run').last().getByTestId('run-text').textContent()).toBe('Hello from stub');
    expect(await page.getByRole('button', { name: 'Continue' }).count()).toBe(0);
    expect(stub.received.at(-1)!.body.messages.at(-1)).toMatchObject({ role: 'user', content: 'Continue.' });
    await page.close();
  });
});
