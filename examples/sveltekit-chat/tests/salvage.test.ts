// Salvage, seen from the browser: with a crash budget of one attempt, a segment whose lease is
// killed is not resumed; the reaper closes the run as aborted and its partial text becomes the
// turn's one message, which the chat marks as cut short (in plain words: "salvaged" is the operator's term).
import { scriptedReplyText } from 'agent-kit';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestStore, hasChromium, open, lastRunText, launchBrowser, sendChat, signIn, skipReason, printServerOutputOnFailure, startServer,
  waitForRunStatus, waitForWords, type AppServer, type TestStore,
} from './harness';

const replyTokens = 200; // an 8 s turn: the kill lands long before it could finish

describe.skipIf(!hasChromium)(`salvage in the browser${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;

  beforeAll(async () => {
    store = await createTestStore();
    server = await startServer({
      store,
      env: {
        AGENT_KIT_SCRIPTED_TOKENS: String(replyTokens), AGENT_KIT_SCRIPTED_DELAY_MS: '40',
        AGENT_KIT_MAX_RUN_ATTEMPTS: '1',
      },
    });
    browser = await launchBrowser();
  });

  printServerOutputOnFailure(() => server);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await store?.dispose();
  });

  it('marks a turn whose only allowed segment died as salvaged, keeping its partial text once', async () => {
    const alice = await signIn(browser, server.baseUrl, 'alice');
    const chat = await alice.newPage();
    await open(chat, `${server.baseUrl}/`);
    const message = 'Salvage what you can';
    const threadId = await sendChat(chat, message);
    await waitForWords(chat, 3);
    const thread = await (await chat.request.get(`${server.baseUrl}/api/threads/${threadId}`)).json();
    const runId = (thread as { runs: { id: string }[] }).runs[0]!.id;

    const operator = await signIn(browser, server.baseUrl, 'operator');
    const kill = await operator.request.post(`${server.baseUrl}/api/demo/runs/${runId}/expire-lease`);
    expect(kill.status()).toBe(200);
    const refused = await alice.request.post(`${server.baseUrl}/api/demo/runs/${runId}/expire-lease`);
    expect(refused.status()).toBe(404);

    await waitForRunStatus(chat, 'aborted', 30_000);
    await expect(chat.getByTestId('run-badge').textContent()).resolves.toBe('cut short by an interruption');
    const text = (await lastRunText(chat)).trim();
    expect(text.length).toBeGreaterThan(0);
    expect(scriptedReplyText([message], replyTokens).startsWith(text)).toBe(true);
    expect(text.length).toBeLessThan(scriptedReplyText([message], replyTokens).trim().length);

    const after = (await (await chat.request.get(`${server.baseUrl}/api/threads/${threadId}`)).json()) as {
      messages: { role: string; text: string; partial: boolean }[];
    };
    const answers = after.messages.filter((m) => m.role === 'assistant');
    expect(answers).toHaveLength(1);
    expect(answers[0]).toMatchObject({ partial: true });
    expect(answers[0]!.text.trim()).toBe(text);
    await operator.close();
    await alice.close();
  });
});
