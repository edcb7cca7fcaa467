// What the model thinks, seen in the browser (ADR-0070): a `#think` turn of the scripted model
// streams its reasoning before its reply. The page shows it live above the reply, open under
// "Thinking…", then closed under "Thought for 1 s" once the reply starts; never in the reply itself;
// the same after a reload; and a turn of two steps thinks twice, a blank line between.
import { scriptedReasoningText, scriptedReplyText, scriptedThinkTag } from 'agent-kit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestStore, hasChromium, lastRunText, launchBrowser, open, printServerOutputOnFailure, reload, sendChat, signIn,
  skipReason, startServer, waitForRunStatus, type AppServer, type TestStore,
} from './harness';

// 40 words at 40 ms each, after about 23 tokens of thinking: a turn of some 2.5 s.
const replyTokens = 40;

/** How the last reply's bubble looked at one moment. */
interface Look {
  summary: string | null;
  open: boolean | null;
  reasoning: string;
  text: string;
  /** The "Thinking…" line a bubble shows before anything else. */
  placeholder: boolean;
}

/**
 * Record, from now on, each new look of the last reply's bubble: its thinking may be in view for
 * under a second, which a test that polled for it could miss on a slow machine.
 */
async function recordLooks(page: Page): Promise<void> {
  await page.evaluate(() => {
    const looks: Look[] = [];
    Object.assign(window, { looks });
    new MutationObserver(() => {
      const runs = document.querySelectorAll('[data-testid="run"]');
      const run = runs[runs.length - 1];
      if (!run) return;
      const details = run.querySelector<HTMLDetailsElement>('[data-testid="reasoning"]');
      const look: Look = {
        summary: details?.querySelector('summary')?.textContent ?? null,
        open: details?.open ?? null,
        reasoning: run.querySelector('[data-testid="reasoning-text"]')?.textContent ?? '',
        text: run.querySelector('[data-testid="run-text"]')?.textContent ?? '',
        placeholder: run.querySelector('.thinking') !== null,
      };
      if (JSON.stringify(look) !== JSON.stringify(looks.at(-1))) looks.push(look);
    }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
  });
}

function looksSeen(page: Page): Promise<Look[]> {
  return page.evaluate(() => (window as unknown as { looks: Look[] }).looks);
}

/** The last reply's thinking as the page shows it now. */
async function shownReasoning(page: Page) {
  const details = page.getByTestId('run').last().getByTestId('reasoning');
  return {
    summary: await details.locator('summary').textContent(),
    open: await details.evaluate((element) => (element as HTMLDetailsElement).open),
    text: await details.getByTestId('reasoning-text').textContent(),
  };
}

/** The seconds in a "Thought for 3 s" heading; it fails the test on any other heading. */
function secondsThought(summary: string): number {
  const match = /^Thought for (\d+) s$/.exec(summary);
  expect(match, summary).not.toBeNull();
  return Number(match![1]);
}

describe.skipIf(!hasChromium)(`the model's thinking${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
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

  it('shows the thinking live and open before the reply, then closed, and the same after a reload', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await recordLooks(page);
    const message = `mull it over ${scriptedThinkTag} ${Date.now()}`;
    await sendChat(page, message);
    await waitForRunStatus(page, 'completed');
    const reasoning = scriptedReasoningText([message], 0, replyTokens);
    const reply = scriptedReplyText([message], replyTokens).trim();

    const looks = await looksSeen(page);
    for (const look of looks) {
      expect(reasoning.startsWith(look.reasoning)).toBe(true);
      expect(reply.startsWith(look.text.trim())).toBe(true);
    }
    const thinking = looks.filter((look) => look.reasoning !== '' && look.text === '');
    expect(thinking[0]).toMatchObject({ summary: 'Thinking…', open: true, placeholder: false });
    // Each time it showed thinking, it was open under "Thinking…" alone. (That the log gets the
    // thinking in parts, before it ends, is reasoning-shown.test.ts's; the page may apply them in
    // one change when one network read brings them all, ADR-0048, as CI's loaded machine did.)
    expect(thinking.filter((look) => look.summary !== 'Thinking…' || !look.open || look.placeholder)).toEqual([]);
    // The reply's first word came after all of the thinking, which closed then.
    const first = looks.find((look) => look.text !== '');
    expect(first).toMatchObject({ reasoning, open: false });
    // How long, in the log's times: some 23 tokens of thinking at 40 ms each is a second or more.
    const summary = first!.summary!;
    expect(secondsThought(summary)).toBeGreaterThanOrEqual(1);

    expect((await lastRunText(page)).trim()).toBe(reply);
    expect(reply).not.toContain('Thinking it over');
    expect(await shownReasoning(page)).toEqual({ summary, open: false, text: reasoning });
    // The reader opens it; nothing closes it behind their back.
    await page.getByTestId('reasoning').locator('summary').click();
    await page.getByTestId('reasoning-text').waitFor({ state: 'visible' });
    expect((await shownReasoning(page)).open).toBe(true);

    await reload(page);
    await waitForRunStatus(page, 'completed');
    expect(await shownReasoning(page)).toEqual({ summary, open: false, text: reasoning }); // replayed, the same
    expect((await lastRunText(page)).trim()).toBe(reply);
    await page.close();
  });

  it('shows each step\'s thinking of a turn that calls a tool, a blank line between', async () => {
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    await recordLooks(page);
    const message = `note it ${scriptedThinkTag} #effect ${Date.now()}`;
    await sendChat(page, message);
    await waitForRunStatus(page, 'completed');
    const reasoning = `${scriptedReasoningText([message], 0, replyTokens)}\n\n${scriptedReasoningText([message], 1, replyTokens)}`;

    // Still "Thinking…" in the second step: no word of the reply yet.
    const looks = await looksSeen(page);
    expect(looks.filter((look) => look.reasoning.includes('\n\n') && look.text === '')[0])
      .toMatchObject({ summary: 'Thinking…', open: true, placeholder: false });
    const shown = await shownReasoning(page);
    expect(shown).toMatchObject({ open: false, text: reasoning });
    expect(secondsThought(shown.summary!)).toBeGreaterThanOrEqual(2); // two stretches of a second or more
    expect((await lastRunText(page)).trim()).toBe(scriptedReplyText([message], replyTokens).trim());
    await expect(page.getByTestId('run').last().textContent()).resolves.toContain('record_effect → completed');
    await page.close();
  });
});
