// Salvage, seen from the browser: with a crash budget of one attempt, a segment whose lease is
// killed is not resumed; the reaper closes the run as aborted and its partial text becomes the
// turn's one message, which the chat marks as cut short (in plain words: "salvaged" is the operator's term).
// A run that dies while a tool runs is seeded through agent-kit's API before the server starts
// (the embedded store has one process at a time), so that its effect is left in doubt; the
// operator then records on the operator page that it did not happen, and the chat says so.
import {
  beginSegment, claimRun, closeRun, effectKey, mirrorPartial, openDb, scriptedReplyText, startEffect, startTurn,
} from 'agent-kit';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestStore, hasChromium, open, lastRunText, launchBrowser, reload, sendChat, signIn, skipReason,
  printServerOutputOnFailure, startServer, waitForRunStatus, waitForWords, type AppServer, type TestStore,
} from './harness';

const replyTokens = 200; // an 8 s turn: the kill lands long before it could finish

/**
 * Alice's turn whose segment, held by a worker that is not there, began a transfer and said so:
 * the effect is `started`, the lease live for ten minutes, so it stands still until killed.
 */
async function seedTurnDyingMidTransfer(
  store: TestStore,
): Promise<{ threadId: string; runId: string; plainRunId: string }> {
  const db = await openDb({ databaseUrl: store.databaseUrl, dataDir: store.dataDir });
  try {
    const turn = await startTurn(db, { ownerId: 'alice', text: 'Pay the invoice #approve' });
    const claim = await claimRun(db, { runId: turn.runId, owner: 'gone-worker', leaseTtlMs: 600_000 });
    if (!claim.claimed) throw new Error(`seeding: the run was not claimed (${claim.reason})`);
    await beginSegment(db, claim.lease, '');
    await mirrorPartial(db, claim.lease, 'Paying the invoice now. ');
    const key = effectKey(turn.runId, 0, 0);
    await startEffect(db, claim.lease, key, 'transfer_funds', { amount: 42, to: 'demo' });
    // And a turn that simply completed: the operator page's filter must leave it out.
    const plain = await startTurn(db, { ownerId: 'bob', text: 'Hello' });
    const plainClaim = await claimRun(db, { runId: plain.runId, owner: 'gone-worker', leaseTtlMs: 60_000 });
    if (!plainClaim.claimed) throw new Error(`seeding: the plain run was not claimed (${plainClaim.reason})`);
    if (!(await closeRun(db, plainClaim.lease, 'completed', { text: 'Hello to you.' }))) throw new Error('seeding: close refused');
    return { threadId: turn.threadId, runId: turn.runId, plainRunId: plain.runId };
  } finally {
    await db.close();
  }
}

describe.skipIf(!hasChromium)(`salvage in the browser${hasChromium ? '' : ` (skipped: ${skipReason})`}`, () => {
  let store: TestStore;
  let server: AppServer;
  let browser: Browser;
  let midTransfer: { threadId: string; runId: string; plainRunId: string };

  beforeAll(async () => {
    store = await createTestStore();
    midTransfer = await seedTurnDyingMidTransfer(store);
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
    // Signed in before the turn starts: a sign-in between the turn's first words and the kill
    // took long enough on a loaded machine for the turn to be past running (a 409).
    const operator = await signIn(browser, server.baseUrl, 'operator');
    const chat = await alice.newPage();
    await open(chat, `${server.baseUrl}/`);
    const message = 'Salvage what you can';
    const threadId = await sendChat(chat, message);
    await waitForWords(chat, 3);
    const thread = await (await chat.request.get(`${server.baseUrl}/api/threads/${threadId}`)).json();
    const runId = (thread as { runs: { id: string }[] }).runs[0]!.id;

    const kill = await operator.request.post(`${server.baseUrl}/api/demo/runs/${runId}/expire-lease`);
    const runNow = (await (await operator.request.get(`${server.baseUrl}/api/runs/${runId}`)).json()) as { run: object };
    expect(kill.status(), `the run at the kill: ${JSON.stringify(runNow.run)}`).toBe(200);
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

  it('says under a reply cut short while a tool ran that its outcome is unknown, live and reopened', async () => {
    const alice = await signIn(browser, server.baseUrl, 'alice');
    const chat = await alice.newPage();
    await open(chat, `${server.baseUrl}/t/${midTransfer.threadId}`);
    await chat.getByTestId('run-text').filter({ hasText: 'Paying the invoice now.' }).waitFor();
    const notice = 'The outcome of transfer_funds is unknown: check it before trying again.';

    const operator = await signIn(browser, server.baseUrl, 'operator');
    const kill = await operator.request.post(`${server.baseUrl}/api/demo/runs/${midTransfer.runId}/expire-lease`);
    expect(kill.status()).toBe(200);
    await waitForRunStatus(chat, 'aborted', 30_000);
    const doubts = () => chat.getByTestId('run').getByTestId('in-doubt').allInnerTexts(); // no waiting
    await expect.poll(doubts, { timeout: 5_000 }).toEqual([notice]);
    await expect(chat.getByTestId('announcer').textContent())
      .resolves.toBe(`The reply was cut short by an interruption. ${notice}`);

    // Reopened, the log's replay names it again (and, being history, announces nothing).
    await reload(chat);
    await waitForRunStatus(chat, 'aborted');
    await expect(doubts()).resolves.toEqual([notice]);
    await expect(chat.getByTestId('announcer').textContent()).resolves.toBe('');

    // The operator looks the transfer up, finds nothing and says so on the operator page; the
    // chat, still open, replaces the warning with what was found (and says it).
    // Among all the runs, the filter lists the one in doubt; selecting it keeps the filter.
    const ops = await operator.newPage();
    await open(ops, `${server.baseUrl}/ops`);
    const listed = () => ops.getByTestId('run-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-run-id')));
    await expect.poll(listed).toEqual(expect.arrayContaining([midTransfer.runId, midTransfer.plainRunId]));
    // Above the table, the store's status names it among what needs attention (ADR-0053).
    const alerts = () => ops.getByTestId('status-alerts').locator('li').allInnerTexts(); // no waiting
    await expect.poll(alerts, { timeout: 5_000 }).toEqual([
      '1 effect is in doubt in 1 run: list them with agent-kit runs --in-doubt, give each a verdict with agent-kit resolve-effect',
    ]);
    // (And the salvages of the hour, this turn's among them.)
    await expect(ops.getByTestId('store-status').textContent()).resolves
      .toMatch(/ · 1 effect in doubt · in the last hour: 0 failed, [1-9]\d* salvaged$/);
    await ops.getByLabel('Only runs with effects in doubt').check();
    await expect.poll(listed, { timeout: 5_000 }).toEqual([midTransfer.runId]);
    await ops.getByTestId('run-row').click();
    await ops.getByTestId('run-detail').waitFor();
    expect(new URL(ops.url()).search).toBe(`?inDoubt=1&run=${midTransfer.runId}`);
    const effectRow = ops.getByTestId('effect-row');
    await expect(effectRow.getAttribute('data-status')).resolves.toBe('in_doubt');
    await ops.getByLabel('Note on transfer_funds').fill('no transfer in the bank statement');
    await ops.getByRole('button', { name: 'It did not happen' }).click();
    await ops.getByText('Recorded: transfer_funds did not happen.').waitFor();
    await expect.poll(() => effectRow.getAttribute('data-status'), { timeout: 5_000 }).toBe('failed');
    await expect(effectRow.textContent()).resolves.toContain('operator checked: it did not happen (no transfer in the bank statement)');
    await expect(ops.getByRole('button', { name: 'It did not happen' }).count()).resolves.toBe(0);
    await expect.poll(listed, { timeout: 5_000 }).toEqual([]);
    await ops.getByText('No run has an effect in doubt.').waitFor();
    await expect.poll(alerts, { timeout: 5_000 }).toEqual([]);
    await expect(ops.getByTestId('status-alerts').count()).resolves.toBe(0);
    await expect(ops.getByTestId('store-status').textContent()).resolves.toMatch(/ · 0 effects in doubt · in the last hour: /);
    // Out of the list now, the run stays selected and described from its own read.
    await expect(ops.getByTestId('run-detail').textContent()).resolves.toMatch(/of\s+alice\s+·\s+turn 1/);

    const found = 'Checked since: transfer_funds did not go through; you can ask again.';
    await expect.poll(doubts, { timeout: 5_000 }).toEqual([found]);
    await expect(chat.getByTestId('announcer').textContent()).resolves.toBe(found);
    await reload(chat);
    await waitForRunStatus(chat, 'aborted');
    // Polled: the verdict's event comes after the run's close in the log, so the replay can show
    // the run aborted, still in doubt, a moment before it brings the verdict.
    await expect.poll(doubts, { timeout: 5_000 }).toEqual([found]);
    await operator.close();
    await alice.close();
  });
});
