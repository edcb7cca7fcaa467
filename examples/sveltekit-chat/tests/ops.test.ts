// The operator page in Chromium, as an operator leaves it open: its timeline follows the run's
// thread once (not again at every poll of the table), a server that goes away and comes back is
// waited out on the page (not the browser's error page), an unknown run says so, a finished
// run's controls are disabled; with more runs and threads than a page holds, the operator page
// and the chat's sidebar reach the older ones page by page; a run's timeline replays from the
// run's first event; a regenerated reply's run and the run that replaced it say so; a run's
// thread lists its runs alone.
import crypto from 'node:crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestStore, hasChromium, open, launchBrowser, sendChat, signIn, skipReason,
  printServerOutputOnFailure, startServer, waitForRunStatus, type AppServer, type TestStore,
} from './harness';

const serverEnv = { AGENT_KIT_SCRIPTED_TOKENS: '5', AGENT_KIT_SCRIPTED_DELAY_MS: '10' };

/** Requests the page makes for thread event streams, counted from now on. */
/** Count the page's event streams, and the seq each one replays after. */
function countEventStreams(page: Page): { count: () => number; afters: number[] } {
  const afters: number[] = [];
  page.on('request', (request) => {
    if (!/\/api\/threads\/[^/]+\/events/.test(request.url())) return;
    afters.push(Number(new URL(request.url()).searchParams.get('after') ?? 0));
  });
  return { count: () => afters.length, afters };
}

describe.skipIf(!hasChromium)(`the operator page${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;
  let alice: BrowserContext;
  let operator: BrowserContext;
  let runId: string;

  beforeAll(async () => {
    store = await createTestStore();
    server = await startServer({ store, env: serverEnv });
    browser = await launchBrowser();
    alice = await signIn(browser, server.baseUrl, 'alice');
    operator = await signIn(browser, server.baseUrl, 'operator');
    const page = await alice.newPage();
    await open(page, `${server.baseUrl}/`);
    const threadId = await sendChat(page, 'a short turn for the operator');
    await waitForRunStatus(page, 'completed');
    const response = await page.request.get(`${server.baseUrl}/api/threads/${threadId}`);
    runId = ((await response.json()) as { runs: { id: string }[] }).runs[0]!.id;
    await page.close();
  });

  printServerOutputOnFailure(() => server);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await store?.dispose();
  });

  it("follows the selected run's thread once while the table polls", async () => {
    const page = await operator.newPage();
    const streams = countEventStreams(page);
    await open(page, `${server.baseUrl}/ops?run=${runId}`);
    await page.getByTestId('segment').first().waitFor();
    await page.waitForTimeout(3_500); // three polls of the table
    // One stream for the timeline; before, every poll replaced the page's data and the timeline
    // dropped its events and replayed the thread from seq 0 (4 or more streams here).
    expect(streams.count()).toBe(1);
    await page.close();
  });

  it("says when the app's own worker last drained and reaped", async () => {
    const page = await operator.newPage();
    await open(page, `${server.baseUrl}/ops`);
    await expect(page.getByTestId('store-passes').textContent())
      .resolves.toMatch(/^Last looked: drain \d+ s ago \(worker-\S+\) · reaper \d+ s ago \(worker-\S+-reap\)$/);
    await page.close();
  });

  it('lists the segments as text, disables a finished run\'s controls, and names an unknown run', async () => {
    const page = await operator.newPage();
    await open(page, `${server.baseUrl}/ops?run=${runId}`);
    await page.getByTestId('run-detail').waitFor();
    for (const name of ['Take over', 'Release', 'Cancel', 'Kill segment (demo)']) {
      expect(await page.getByRole('button', { name }).isDisabled(), name).toBe(true);
    }
    // The timeline's facts as text: the one segment, its owner and how it ended. The rows come
    // from the thread's event stream, which the page opens after the run's detail has rendered.
    const rows = page.getByTestId('segment-row');
    await expect.poll(() => rows.allTextContents(), { timeout: 10_000 })
      .toEqual([expect.stringMatching(/^11.*closed: completed$/)]);
    // And its markers, which the picture names only to a pointer hovering them.
    await page.getByTestId('timeline-entries').getByText(/^Markers as text \(\d+\)$/).click();
    const entries = page.getByTestId('timeline-entry');
    expect((await entries.allTextContents()).map((text) => text.replace(/\s+/g, ' ').trim())).toEqual([
      expect.stringMatching(/^\+0\.\d s intent · user message$/),
      expect.stringMatching(/^\+\d+\.\d s intent · queued$/),
      expect.stringMatching(/^\+\d+\.\d s fence 1 · step 0$/),
    ]);
    expect(await entries.first().isVisible()).toBe(true);
    // The model's tokens, as GET /api/runs/:id adds them up (ADR-0065): the scripted model
    // counts the words of the prompt (the app's instructions and the message) and of the reply.
    const detail = await (await operator.request.get(`${server.baseUrl}/api/runs/${runId}`)).json() as {
      usage: { inputTokens: number; outputTokens: number; modelSteps: number; reported: number };
    };
    expect(detail.usage).toEqual({ inputTokens: expect.any(Number), outputTokens: expect.any(Number), modelSteps: 1, reported: 1 });
    expect(detail.usage.inputTokens).toBeGreaterThan(6);
    expect(detail.usage.outputTokens).toBeGreaterThan(0);
    expect(await page.getByTestId('run-usage').textContent())
      .toBe(`${detail.usage.inputTokens} tokens in · ${detail.usage.outputTokens} out`);
    // And the runs table, from GET /api/runs.
    expect(await page.locator(`[data-testid="run-row"][data-run-id="${runId}"] [data-testid="run-tokens"]`).textContent())
      .toBe(`${detail.usage.inputTokens} / ${detail.usage.outputTokens}`);
    await open(page, `${server.baseUrl}/ops?run=00000000-0000-4000-8000-000000000000`);
    await expect(page.getByTestId('run-not-found').textContent()).resolves.toContain('00000000-0000-4000-8000-000000000000');
    await page.close();
  });

  it('waits out a server restart on the page instead of leaving for the browser\'s error page', async () => {
    const page = await operator.newPage();
    await open(page, `${server.baseUrl}/ops?run=${runId}`);
    await page.getByTestId('run-detail').waitFor();
    const port = Number(new URL(server.baseUrl).port);
    await server.kill();
    await page.getByTestId('unreachable').waitFor({ timeout: 10_000 });
    await page.waitForTimeout(1_500); // more polls fail meanwhile
    expect(page.url()).toBe(`${server.baseUrl}/ops?run=${runId}`); // was chrome-error://chromewebdata/
    server = await startServer({ store, port, env: serverEnv });
    await page.getByTestId('unreachable').waitFor({ state: 'detached', timeout: 10_000 });
    expect(await page.getByTestId('run-row').count()).toBeGreaterThan(0);
    await page.close();
  });

  describe('with more runs and threads than a page holds', () => {
    // 52 more turns of alice's, each on its own thread: 53 runs and threads in all.
    beforeAll(async () => {
      for (let batch = 0; batch < 4; batch++) {
        await Promise.all(Array.from({ length: 13 }, async (_, i) => {
          const response = await alice.request.post(`${server.baseUrl}/api/chat`,
            { data: { message: `turn ${batch * 13 + i} of many` } });
          expect(response.status()).toBe(200);
          await response.body(); // the whole turn, streamed to its end
        }));
      }
    }, 120_000);

    it('pages back through the runs, the page kept in the URL and by the poll', async () => {
      // A page of fifty and one of three (the oldest, runId's).
      const page = await operator.newPage();
      const rows = page.getByTestId('run-row');
      const shownIds = () => rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-run-id')!));
      await open(page, `${server.baseUrl}/ops`);
      await expect.poll(() => rows.count()).toBe(50);
      expect(await page.getByTestId('newest-runs').count()).toBe(0);
      const newest = await shownIds();

      await page.getByTestId('older-runs').click();
      await page.waitForURL(`${server.baseUrl}/ops?before=${newest.at(-1)}`);
      await expect.poll(() => rows.count()).toBe(3);
      const older = await shownIds();
      expect(older.filter((id) => newest.includes(id))).toEqual([]);
      expect(older.at(-1)).toBe(runId); // the first turn of all is the oldest run
      expect(await page.getByTestId('older-runs').count()).toBe(0);

      // Selecting a run keeps the page; the poll reads the same page again.
      await page.locator(`[data-testid="run-row"][data-run-id="${runId}"]`).click();
      await page.waitForURL(`${server.baseUrl}/ops?before=${newest.at(-1)}&run=${runId}`);
      await page.getByTestId('run-detail').waitFor();
      await page.waitForTimeout(2_500); // two polls
      expect(await shownIds()).toEqual(older);

      await page.getByTestId('newest-runs').click();
      await page.waitForURL(`${server.baseUrl}/ops?run=${runId}`);
      await expect.poll(() => rows.count()).toBe(50);
      await page.getByTestId('run-detail').waitFor(); // the selected run, from off the page

      // A page whose first run is no run at all: the newest runs, and the URL says so.
      await open(page, `${server.baseUrl}/ops?before=00000000-0000-4000-8000-000000000000`);
      await page.waitForURL(`${server.baseUrl}/ops`);
      expect(await rows.count()).toBe(50);
      await page.close();
    });

    it("shows a selected run's detail without leaving the table, and a linked run's row in the table", async () => {
      const page = await operator.newPage();
      const rows = page.getByTestId('run-row');
      await open(page, `${server.baseUrl}/ops`);
      await expect.poll(() => rows.count()).toBe(50);
      const viewport = page.viewportSize()!;
      // Fifty rows are taller than the screen; the table is not: the detail of the run clicked
      // at its top comes into view below it, and the page has not scrolled (the detail was
      // fifty rows down, out of view).
      await rows.first().click();
      const heading = page.getByTestId('run-detail').getByRole('heading', { level: 2 });
      await heading.waitFor();
      const box = (await heading.boundingBox())!;
      expect(box.y + box.height).toBeLessThan(viewport.height);
      expect(await page.evaluate(() => window.scrollY)).toBe(0);
      const scroller = page.getByTestId('runs-scroll');
      expect(await scroller.evaluate((el) => el.scrollHeight > el.clientHeight)).toBe(true);

      // Opened on the page's last run (a link, a reload): the table scrolls to that row, its head
      // still above it.
      const lastId = await rows.last().getAttribute('data-run-id');
      await open(page, `${server.baseUrl}/ops?run=${lastId}`);
      await page.getByTestId('run-detail').waitFor();
      const row = page.locator(`[data-testid="run-row"][data-run-id="${lastId}"]`);
      await expect.poll(async () => {
        const [rowBox, tableBox, headBox] = await Promise.all([
          row.boundingBox(), scroller.boundingBox(), page.getByTestId('runs').locator('thead').boundingBox(),
        ]);
        return rowBox!.y >= headBox!.y + headBox!.height - 1 && rowBox!.y + rowBox!.height <= tableBox!.y + tableBox!.height + 1;
      }).toBe(true);
      await page.close();
    });

    it('reaches the threads past the chat sidebar\'s first page, and keeps them while moving among them', async () => {
      // The first page holds thirty of alice's 53 threads, "Older threads" the other 23.
      const page = await alice.newPage();
      await open(page, `${server.baseUrl}/`);
      const sidebar = page.getByRole('navigation', { name: 'Threads' });
      const threadLinks = sidebar.locator('a[href^="/t/"]');
      const older = sidebar.getByRole('button', { name: 'Older threads' });
      expect(await threadLinks.count()).toBe(30);
      await older.click();
      await expect.poll(() => threadLinks.count()).toBe(53);
      expect(await older.count()).toBe(0); // the oldest thread is shown
      const hrefs = await threadLinks.evaluateAll((links) => links.map((a) => a.getAttribute('href')));
      expect(new Set(hrefs).size).toBe(53);

      // Open the oldest: the page is keyed on its thread, the older threads stay in the sidebar.
      await threadLinks.last().click();
      await page.waitForURL(`${server.baseUrl}${hrefs.at(-1)}`);
      await expect.poll(() => threadLinks.count()).toBe(53);
      expect(await sidebar.locator('a[aria-current="page"]').getAttribute('href')).toBe(hrefs.at(-1));
      await page.close();
    });
  });

  // Last: its second turn would change the run counts the paging tests expect.
  it("replays the run's thread from the run's own first event, not from the thread's start", async () => {
    const threadId = (await (await alice.request.get(`${server.baseUrl}/api/runs/${runId}`)).json()).run.threadId as string;
    const next = await alice.request.post(`${server.baseUrl}/api/chat`, {
      data: { threadId, message: 'a second turn', clientMessageId: crypto.randomUUID() },
    });
    await next.body();
    const secondRunId = next.headers()['x-agent-kit-run-id']!;
    const { firstSeq } = (await (await operator.request.get(`${server.baseUrl}/api/runs/${secondRunId}`)).json()) as { firstSeq: number };
    expect(firstSeq).toBeGreaterThan(1);
    const page = await operator.newPage();
    const streams = countEventStreams(page);
    await open(page, `${server.baseUrl}/ops?run=${secondRunId}`);
    await page.getByTestId('segment-row').first().waitFor();
    expect(streams.afters[0]).toBe(firstSeq - 1);
    const rows = page.getByTestId('segment-row');
    expect(await rows.count()).toBe(1);
    // Polled: the row shows with the segment's start, and says how it ended once the replay has
    // brought the run's close, which can come in a later read of the stream.
    await expect.poll(() => rows.first().textContent(), { timeout: 10_000 }).toMatch(/closed: completed$/);
    await page.close();
  });

  it('marks on the timeline where a segment waited for a model that refused it', async () => {
    const bob = await signIn(browser, server.baseUrl, 'bob'); // alice's threads are counted above
    const chat = await bob.newPage();
    await open(chat, `${server.baseUrl}/`);
    const threadId = await sendChat(chat, 'are you there #busy');
    await waitForRunStatus(chat, 'completed');
    const response = await chat.request.get(`${server.baseUrl}/api/threads/${threadId}`);
    const busyRun = ((await response.json()) as { runs: { id: string }[] }).runs[0]!.id;
    await bob.close();
    const page = await operator.newPage();
    await open(page, `${server.baseUrl}/ops?run=${busyRun}`);
    const marker = page.getByTestId('retry-marker');
    await marker.waitFor();
    await expect(marker.locator('title').textContent()).resolves
      .toMatch(/^model refused \(429\): retry 1 of 5 in 1\.0 s — the scripted model is busy/);
    await expect.poll(() => page.getByTestId('segment-row').allTextContents(), { timeout: 10_000 })
      .toEqual([expect.stringMatching(/closed: completed$/)]); // one segment: the wait spent no attempt
    await page.close();
  });

  // (Last: its thread and runs would change the counts the pages of runs and threads above expect.)
  it('says of a regenerated reply which run replaced it, and of the new run which reply it replaced', async () => {
    const chat = await alice.newPage();
    await open(chat, `${server.baseUrl}/`);
    const threadId = await sendChat(chat, `regenerated for the operator ${Date.now()}`);
    await waitForRunStatus(chat, 'completed');
    const read = async () => (await (await chat.request.get(`${server.baseUrl}/api/threads/${threadId}`)).json()) as {
      runs: { id: string }[]; messages: { role: string; clientMessageId: string | null }[];
    };
    const before = await read();
    const old = before.runs[0]!.id;
    const clientMessageId = before.messages.find((m) => m.role === 'user')!.clientMessageId!;
    const posted = await chat.request.post(`${server.baseUrl}/api/chat`, {
      data: { threadId, clientMessageId, message: 'edited for the operator', regenerate: true, replaces: old },
    });
    expect(posted.status()).toBe(200);
    const again = posted.headers()['x-agent-kit-run-id']!;
    await chat.close();

    const page = await operator.newPage();
    await open(page, `${server.baseUrl}/ops?run=${again}`);
    await expect(page.getByTestId('regenerates').textContent())
      .resolves.toMatch(new RegExp(`Asks again the turn of run ${old.slice(0, 8)}, with the message edited`));
    await open(page, `${server.baseUrl}/ops?run=${old}`);
    await expect(page.getByTestId('superseded').textContent()).resolves.toMatch(new RegExp(`Replaced by run ${again.slice(0, 8)}`));
    expect(await page.getByTestId('regenerates').count()).toBe(0);
    expect(await page.getByTestId('restored-over').count()).toBe(0);

    // The old answer put back (ADR-0096): it says which run it took the place of, and is replaced no more.
    const restored = await page.request.post(`${server.baseUrl}/api/runs/${old}/restore`);
    expect(await restored.json()).toMatchObject({ runId: old, superseded: [again], restored: true });
    await open(page, `${server.baseUrl}/ops?run=${old}`);
    await expect(page.getByTestId('restored-over').textContent()).resolves.toMatch(new RegExp(`Put back in place of run ${again.slice(0, 8)}`));
    expect(await page.getByTestId('superseded').count()).toBe(0);
    await open(page, `${server.baseUrl}/ops?run=${again}`);
    await expect(page.getByTestId('superseded').textContent()).resolves.toMatch(new RegExp(`Replaced by run ${old.slice(0, 8)}`));
    await page.close();
  });

  it("lists one thread's runs from a run's detail (ADR-0095), kept by the poll and a reload, and all runs again", async () => {
    const chat = await alice.newPage();
    await open(chat, `${server.baseUrl}/`);
    const threadId = await sendChat(chat, `a thread to look into ${Date.now()}`);
    await waitForRunStatus(chat, 'completed');
    await sendChat(chat, 'and its second turn');
    await chat.locator('[data-testid="run"][data-status="completed"]').nth(1).waitFor();
    const threadRuns = ((await (await chat.request.get(`${server.baseUrl}/api/threads/${threadId}`)).json()) as {
      runs: { id: string }[];
    }).runs.map((run) => run.id).reverse(); // the list's order: newest first
    expect(threadRuns).toHaveLength(2);
    await chat.close();

    const page = await operator.newPage();
    await open(page, `${server.baseUrl}/ops?run=${threadRuns[1]}`);
    const listed = () => page.getByTestId('run-row').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-run-id')));
    expect((await listed()).length).toBeGreaterThan(2); // every run: other threads' too
    await page.getByTestId('thread-runs').click();
    await page.waitForURL((url) => url.searchParams.get('thread') === threadId && url.searchParams.get('run') === threadRuns[1]);
    await expect.poll(listed).toEqual(threadRuns);
    await expect(page.getByTestId('thread-filter').textContent()).resolves.toContain(threadId.slice(0, 13));
    expect(await page.getByTestId('thread-runs').count()).toBe(0); // the table is that thread's already
    // The table's poll reads the same filter.
    const polls: string[] = [];
    page.on('request', (request) => {
      if (new URL(request.url()).pathname === '/api/runs') polls.push(request.url());
    });
    await expect.poll(() => polls.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
    expect(polls.every((url) => new URL(url).searchParams.get('thread') === threadId), polls.join(' ')).toBe(true);
    expect(await listed()).toEqual(threadRuns);
    await page.reload();
    expect(await listed()).toEqual(threadRuns);
    await page.getByTestId('all-runs').click();
    await page.waitForURL((url) => !url.searchParams.has('thread'));
    await expect.poll(async () => (await listed()).length).toBeGreaterThan(2);
    expect(await page.getByTestId('thread-filter').count()).toBe(0);
    await page.close();
  });
});
