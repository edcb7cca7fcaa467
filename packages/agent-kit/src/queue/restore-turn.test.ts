// Restoring an earlier answer on both stores (ADR-0096): the run in the answer's place and every
// turn after it are superseded, the answer's message comes back under the client id the page
// has, the next turn's model is given the restored answer, and the log says so in one event. A
// run left out as a turn after a replaced reply is not an answer to restore; refusals write
// nothing; the same call again writes nothing. On Postgres, restores at once serialize.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb, onPostgres } from '../../test/harness/test-db.js';
import { numberedRepliesModel, type PromptMessage } from '../../test/harness/steps-model.js';
import { answeredThread, makeRuntime } from '../../test/harness/turn-kit.js';
import { formatShowCommand } from '../cli/commands/show.js';
import { ConflictError, InvalidArgumentError, NotFoundError } from '../errors.js';
import { readEvents } from '../event-log/read-events.js';
import { readRunDetail } from '../event-log/read-runs.js';
import { listThreadMessages, listThreadRuns } from '../event-log/read-threads.js';
import { readTurnPage } from '../event-log/turn-window.js';
import type { Db } from '../store/db.js';
import { runSegment } from '../turn/run-segment.js';
import { regenerateTurn } from './regenerate-turn.js';
import { restoreTurn } from './restore-turn.js';
import { startTurn } from './start-turn.js';

let db: Db;
const prompts: PromptMessage[][] = [];
const model = numberedRepliesModel(prompts);

beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const segment = (runId: string) => runSegment(makeRuntime(db, { model }), { runId, owner: 'w' });
const run = async (runId: string) => expect(await segment(runId)).toMatchObject({ kind: 'closed', status: 'completed' });

const thread = (prefix: string, texts: string[]) => answeredThread(db, segment, prefix, texts);

/** Regenerate (or with `text`, edit) and run the new turn: its run id. */
async function regenerate(threadId: string, message: string, text?: string) {
  const again = await regenerateTurn(db, { threadId, ownerId: 'ann', message, ...(text ? { text } : {}) });
  await run(again.runId);
  return again.runId;
}

/** The conversation as a thread read has it: "role: text" lines, and the runs in turn order. */
async function conversation(threadId: string) {
  return {
    said: (await listThreadMessages(db, threadId)).map((m) => `${m.role}: ${m.text}`),
    runs: (await listThreadRuns(db, threadId)).map((r) => r.id),
  };
}

/** What the model was last given, as "role: text" lines. */
function lastPrompt(): string[] {
  return prompts.at(-1)!.filter((m) => m.role === 'user' || m.role === 'assistant').map((m) => {
    const parts = Array.isArray(m.content) ? m.content as Array<{ type: string; text?: string }> : [];
    return `${m.role}: ${parts.map((p) => p.text ?? '').join('')}`;
  });
}

const replyOf = async (runId: string) => (await db.query<{ text: string }>(
  `select m.content->>'text' as text from agent_kit_runs r join agent_kit_messages m on m.id = r.message_id where r.id = $1`,
  [runId]))[0]!.text;

/** Everything a restore writes, of one thread: a call that writes nothing leaves it equal. */
async function written(threadId: string) {
  return db.query(
    `select (select count(*)::int from agent_kit_thread_events where thread_id = $1) as events,
            (select json_agg(json_build_object('id', id, 'by', superseded_by) order by turn_no) from agent_kit_runs where thread_id = $1) as runs,
            (select json_agg(json_build_object('id', id, 'run', run_id, 'client', client_message_id) order by id)
               from agent_kit_messages where thread_id = $1) as messages`, [threadId]);
}

describe('restoreTurn', () => {
  it('takes a regenerated reply back: the regeneration leaves, the message returns to its run, the model is given it next', async () => {
    const { threadId, runIds } = await thread('a', ['one', 'two']);
    const earlier = await replyOf(runIds[1]!);
    const again = await regenerate(threadId, 'a2');
    const lastSeq = (await readEvents(db, { threadId })).at(-1)!.seq;

    const restored = await restoreTurn(db, { runId: runIds[1]!, ownerId: 'ann' });
    expect(restored).toMatchObject({ threadId, runId: runIds[1], superseded: [again], restored: true });
    const events = await readEvents(db, { threadId, afterSeq: lastSeq });
    expect(events.map((e) => [e.type, e.runId])).toEqual([['turn-restored', runIds[1]]]);
    expect(events[0]!.data).toEqual({ runId: runIds[1], replaces: again, superseded: [again], messageId: restored.messageId, text: 'two' });

    expect(await conversation(threadId)).toEqual({
      said: ['user: one', `assistant: ${await replyOf(runIds[0]!)}`, 'user: two', `assistant: ${earlier}`],
      runs: runIds,
    });
    const messages = await listThreadMessages(db, threadId);
    expect(messages[2]).toMatchObject({ id: restored.messageId, clientMessageId: 'a2', runId: runIds[1] });
    const page = await readTurnPage(db, threadId, { turns: 50 });
    expect(page.runs.map((r) => r.id)).toEqual(runIds);
    expect(page.messages.at(-1)!.text).toBe(earlier);
    // Each read names the answer it was put back in place of; the replaced run, what replaced it.
    expect((await listThreadRuns(db, threadId)).map((r) => [r.regenerates, r.restoredOver])).toEqual([[null, null], [null, again]]);
    expect(page.runs[1]).toMatchObject({ restoredOver: again });
    expect(await readRunDetail(db, runIds[1]!)).toMatchObject({ restoredOver: again, regenerates: null, run: { supersededBy: null } });
    expect(await readRunDetail(db, again)).toMatchObject({ restoredOver: null, regenerates: { runId: runIds[1] }, run: { supersededBy: runIds[1] } });
    expect(await formatShowCommand(db, runIds[1]!, {}, new Date())).toContain(`  restored  in place of run ${again} (an earlier answer put back)`);
    // Each names the message it answers: the replaced run's is back with the restored one.
    expect((await readRunDetail(db, runIds[1]!))!.question).toMatchObject({ id: restored.messageId, runId: runIds[1], text: 'two' });
    expect((await readRunDetail(db, again))!.question).toMatchObject({ id: restored.messageId, runId: runIds[1], text: 'two' });
    expect(await formatShowCommand(db, again, {}, new Date())).toContain(`messages (2)\n  user (now with run ${runIds[1]}): two\n  assistant: `);

    // The conversation goes on from it: the next turn's model is given the restored answer.
    const next = await startTurn(db, { threadId, ownerId: 'ann', text: 'three' });
    await run(next.runId);
    expect(lastPrompt()).toEqual(['user: one', `assistant: ${await replyOf(runIds[0]!)}`, 'user: two', `assistant: ${earlier}`, 'user: three']);
    expect((await conversation(threadId)).runs).toEqual([...runIds, next.runId]);
    // And the message is the restored run's again: asking its reply again replaces it.
    const third = await regenerateTurn(db, { threadId, ownerId: 'ann', message: 'a2' });
    expect(third).toMatchObject({ messageId: restored.messageId, superseded: [runIds[1], next.runId] });
  });

  it('after the conversation went on: the turns after the reply in its place leave too, and a restore can be undone by another', async () => {
    const { threadId, runIds } = await thread('b', ['one', 'two']);
    const again = await regenerate(threadId, 'b2');
    const later = await startTurn(db, { threadId, ownerId: 'ann', text: 'three' });
    await run(later.runId);

    const first = await restoreTurn(db, { runId: runIds[1]!, ownerId: 'ann' });
    expect(first.superseded).toEqual([again, later.runId]);
    expect((await conversation(threadId)).runs).toEqual(runIds);

    // The regenerated answer is an earlier answer now: restoring it brings it back alone (the turn
    // that followed it stays out, as turns after a regenerated reply do).
    const back = await restoreTurn(db, { runId: again, ownerId: 'ann' });
    expect(back).toMatchObject({ superseded: [runIds[1]], restored: true, messageId: first.messageId });
    expect(await conversation(threadId)).toEqual({
      said: ['user: one', `assistant: ${await replyOf(runIds[0]!)}`, 'user: two', `assistant: ${await replyOf(again)}`],
      runs: [runIds[0], again],
    });
    // The turn that followed it is not an answer to restore.
    const before = await written(threadId);
    await expect(restoreTurn(db, { runId: later.runId, ownerId: 'ann' })).rejects.toThrow(/not an earlier answer: it followed a reply/);
    expect(await written(threadId)).toEqual(before);
  });

  it('finds the answer in its place through several regenerations, edits among them', async () => {
    const { threadId, runIds } = await thread('c', ['one', 'two']);
    const plain = await regenerate(threadId, 'c2');
    const edit = await regenerate(threadId, 'c2', 'two, said better');
    const editAgain = await regenerate(threadId, 'c2');

    // Back to the first answer: the message it answered returns with the page's client id; the
    // edit keeps its text with its run, without the id.
    const first = await restoreTurn(db, { runId: runIds[1]!, ownerId: 'ann' });
    expect(first.superseded).toEqual([editAgain]);
    expect((await listThreadMessages(db, threadId))[2]).toMatchObject({ text: 'two', clientMessageId: 'c2', runId: runIds[1] });
    expect(await db.query(`select content->>'text' as text, client_message_id, run_id from agent_kit_messages
      where thread_id = $1 and role = 'user' and content->>'text' <> 'one' order by created_at`, [threadId])).toEqual([
      { text: 'two', client_message_id: 'c2', run_id: runIds[1] },
      { text: 'two, said better', client_message_id: null, run_id: editAgain },
    ]);

    // To the edit's first answer: the edited message returns with the id, and the model is given it next.
    const toEdit = await restoreTurn(db, { runId: edit, ownerId: 'ann' });
    expect(toEdit.superseded).toEqual([runIds[1]]);
    expect((await conversation(threadId)).said.slice(2)).toEqual(['user: two, said better', `assistant: ${await replyOf(edit)}`]);
    expect((await listThreadMessages(db, threadId))[2]).toMatchObject({ clientMessageId: 'c2', runId: edit });
    const next = await startTurn(db, { threadId, ownerId: 'ann', text: 'three' });
    await run(next.runId);
    expect(lastPrompt().slice(2)).toEqual(['user: two, said better', `assistant: ${await replyOf(edit)}`, 'user: three']);

    // And to the plain regeneration's, whose message moved on to the edit's turn and back.
    const toPlain = await restoreTurn(db, { runId: plain, ownerId: 'ann' });
    expect(toPlain.superseded).toEqual([edit, next.runId]);
    expect((await conversation(threadId)).said.slice(2)).toEqual(['user: two', `assistant: ${await replyOf(plain)}`]);
    expect((await listThreadMessages(db, threadId))[2]).toMatchObject({ clientMessageId: 'c2', runId: plain });
  });

  it('an answer whose place was dropped, when an earlier reply was regenerated, is a conflict; that reply is restored instead', async () => {
    const { threadId, runIds } = await thread('d', ['one', 'two']);
    const second = await regenerate(threadId, 'd2');
    const firstAgain = await regenerate(threadId, 'd1');
    const before = await written(threadId);
    await expect(restoreTurn(db, { runId: runIds[1]!, ownerId: 'ann' })).rejects.toThrow(/place in the conversation was dropped/);
    await expect(restoreTurn(db, { runId: second, ownerId: 'ann' })).rejects.toThrow(/not an earlier answer/);
    expect(await written(threadId)).toEqual(before);

    expect(await restoreTurn(db, { runId: runIds[0]!, ownerId: 'ann' })).toMatchObject({ superseded: [firstAgain], restored: true });
    expect((await conversation(threadId)).runs).toEqual([runIds[0]]); // the turns after it stay out
  });

  it('refuses, writing nothing: a turn under way, another owner, an unknown run, bad ids; a run in the conversation is no change', async () => {
    const { threadId, runIds } = await thread('e', ['one', 'two']);
    await regenerate(threadId, 'e2');
    const queued = await startTurn(db, { threadId, ownerId: 'ann', text: 'not yet' });
    const before = await written(threadId);
    const refusals: Array<[Parameters<typeof restoreTurn>[1], unknown]> = [
      [{ runId: runIds[1]!, ownerId: 'ann' }, ConflictError], // turn 4 is queued
      [{ runId: runIds[1]!, ownerId: 'eve' }, NotFoundError],
      [{ runId: crypto.randomUUID(), ownerId: 'ann' }, NotFoundError],
      [{ runId: 'nope', ownerId: 'ann' }, InvalidArgumentError],
      [{ runId: runIds[1]!, ownerId: ' ' }, InvalidArgumentError],
    ];
    for (const [options, error] of refusals) {
      await expect(restoreTurn(db, options), JSON.stringify(options)).rejects.toBeInstanceOf(error);
    }
    await expect(restoreTurn(db, { runId: runIds[1]!, ownerId: 'ann' })).rejects.toThrow(/turn 4 of thread .* is queued/);
    expect(await restoreTurn(db, { runId: runIds[0]!, ownerId: 'ann' })).toMatchObject({ runId: runIds[0], superseded: [], restored: false });
    expect(await written(threadId)).toEqual(before);

    await run(queued.runId);
    const restored = await restoreTurn(db, { runId: runIds[1]!, ownerId: 'ann' });
    expect(restored.restored).toBe(true);
    // The same call again (a lost response, another tab): answered, nothing written.
    const after = await written(threadId);
    expect(await restoreTurn(db, { runId: runIds[1]!, ownerId: 'ann' })).toEqual({ ...restored, superseded: [], restored: false });
    expect(await written(threadId)).toEqual(after);
  });
});

describe.runIf(onPostgres)('on Postgres', () => {
  it('restores at once of two answers to one message leave one of them in the conversation', async () => {
    const { threadId, runIds } = await thread('f', ['one', 'two']);
    const second = await regenerate(threadId, 'f2');
    const third = await regenerate(threadId, 'f2');
    const results = await Promise.all([runIds[1]!, second, runIds[1]!, second].map((runId) => restoreTurn(db, { runId, ownerId: 'ann' })));
    expect(results.filter((r) => r.restored).length).toBeGreaterThanOrEqual(2); // third's place went to one, then maybe back
    const { runs } = await conversation(threadId);
    expect(runs).toHaveLength(2);
    expect([runIds[1], second]).toContain(runs[1]);
    expect(runs).not.toContain(third);
    expect((await listThreadMessages(db, threadId))[2]).toMatchObject({ clientMessageId: 'f2', runId: runs[1] });
  });
});
