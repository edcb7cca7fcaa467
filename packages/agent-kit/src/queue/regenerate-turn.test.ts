// Regenerating a reply on both stores (ADR-0091): a new run answers the same user message (or its
// edit), the old turn and every later one are superseded, out of the model's history and the thread's reads
// but kept; the log says so in one event; refusals write nothing; on Postgres, two regenerations
// of one turn at once make one new run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb, onPostgres } from '../../test/harness/test-db.js';
import { numberedRepliesModel, type PromptMessage } from '../../test/harness/steps-model.js';
import { answeredThread, makeRuntime } from '../../test/harness/turn-kit.js';
import { ConflictError, InvalidArgumentError, NotFoundError } from '../errors.js';
import { readEvents } from '../event-log/read-events.js';
import { listThreadMessages, listThreadRuns } from '../event-log/read-threads.js';
import { readTurnPage } from '../event-log/turn-window.js';
import type { Db } from '../store/db.js';
import { runSegment } from '../turn/run-segment.js';
import { regenerateTurn } from './regenerate-turn.js';
import { startTurn } from './start-turn.js';

let db: Db;
/** Every prompt the model was given, in order; its nth reply is "reply n". */
const prompts: PromptMessage[][] = [];
const model = numberedRepliesModel(prompts);

beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const run = (runId: string) => runSegment(makeRuntime(db, { model }), { runId, owner: 'w' });

/** The text of each user and assistant message of a prompt, as "role: text". */
function said(prompt: PromptMessage[]): string[] {
  return prompt.filter((m) => m.role === 'user' || m.role === 'assistant').map((m) => {
    const parts = Array.isArray(m.content) ? m.content as Array<{ type: string; text?: string }> : [];
    return `${m.role}: ${parts.map((p) => p.text ?? '').join('')}`;
  });
}

const thread = (prefix: string, texts: string[]) => answeredThread(db, run, prefix, texts);

const count = async (table: string) =>
  Number((await db.query<{ n: number }>(`select count(*)::int as n from ${table}`))[0]!.n);

describe('regenerateTurn', () => {
  it('asks the last turn again: a new run answers the same message, and the old reply leaves the reads and the history', async () => {
    const { threadId, runIds } = await thread('a', ['one', 'two']);
    const lastSeq = (await readEvents(db, { threadId })).at(-1)!.seq;
    const again = await regenerateTurn(db, { threadId, ownerId: 'ann', message: 'a2', text: 'two' });
    expect(again.superseded).toEqual([runIds[1]]);
    expect(again.runId).not.toBe(runIds[1]);

    // One event replaces the turn, then the new run is queued: a viewer folds the log to the same thread.
    const events = await readEvents(db, { threadId, afterSeq: lastSeq });
    expect(events.map((e) => [e.type, e.runId])).toEqual([['turn-regenerated', again.runId], ['run-queued', again.runId]]);
    expect(events[0]!.data).toEqual({
      runId: again.runId, regenerates: runIds[1], superseded: [runIds[1]], messageId: again.messageId, text: 'two', edited: false,
    });

    expect(await run(again.runId)).toMatchObject({ kind: 'closed', status: 'completed' });
    // The model was given the turns before, then the message again: not the reply it replaces.
    expect(said(prompts.at(-1)!)).toEqual(['user: one', 'assistant: reply 1', 'user: two']);

    const messages = await listThreadMessages(db, threadId);
    expect(messages.map((m) => [m.role, m.text, m.runId])).toEqual([
      ['user', 'one', runIds[0]], ['assistant', 'reply 1', runIds[0]],
      ['user', 'two', again.runId], ['assistant', 'reply 3', again.runId],
    ]);
    expect(messages[2]).toMatchObject({ id: again.messageId, clientMessageId: 'a2' }); // the same message, moved
    expect((await listThreadRuns(db, threadId)).map((r) => r.id)).toEqual([runIds[0], again.runId]);
    const page = await readTurnPage(db, threadId, { turns: 50 });
    expect(page.runs.map((r) => r.id)).toEqual([runIds[0], again.runId]);
    expect(page.messages.map((m) => m.text)).toEqual(['one', 'reply 1', 'two', 'reply 3']);

    // Kept for operators: the old run, closed, with its reply and a pointer to what replaced it.
    const [old] = await db.query<{ status: string; superseded_by: string; text: string }>(
      `select r.status, r.superseded_by, m.content->>'text' as text
       from agent_kit_runs r join agent_kit_messages m on m.id = r.message_id where r.id = $1`, [runIds[1]]);
    expect(old).toEqual({ status: 'completed', superseded_by: again.runId, text: 'reply 2' });

    // And once more: the message now belongs to the new run, which it names.
    const third = await regenerateTurn(db, { threadId, ownerId: 'ann', message: again.messageId });
    expect(third.superseded).toEqual([again.runId]);
    expect(third.messageId).toBe(again.messageId);
  });

  it('asks an earlier turn again: every turn after it is superseded too', async () => {
    const { threadId, runIds } = await thread('b', ['first', 'second', 'third', 'fourth']);
    const again = await regenerateTurn(db, { threadId, ownerId: 'ann', message: 'b2' });
    expect(again.superseded).toEqual(runIds.slice(1));
    expect(await run(again.runId)).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(said(prompts.at(-1)!)).toEqual(['user: first', `assistant: ${(await listThreadMessages(db, threadId))[1]!.text}`, 'user: second']);
    expect((await listThreadMessages(db, threadId)).map((m) => m.role === 'user' ? m.text : m.runId)).toEqual([
      'first', runIds[0], 'second', again.runId,
    ]);
    // A later message's turn is gone with it: asking it again is a conflict, and writes nothing.
    await expect(regenerateTurn(db, { threadId, ownerId: 'ann', message: 'b3' })).rejects.toBeInstanceOf(ConflictError);
    // The next message is the next turn, after the regenerated one.
    const next = await startTurn(db, { threadId, ownerId: 'ann', text: 'fifth' });
    expect(await run(next.runId)).toMatchObject({ kind: 'closed' });
    expect(said(prompts.at(-1)!).map((line) => line.split(':')[0] + (line.startsWith('user') ? line.slice(4) : ''))).toEqual([
      'user: first', 'assistant', 'user: second', 'assistant', 'user: fifth',
    ]);
  });

  it('an answer to a question names its turn, which starts again from the message that began it', async () => {
    const { threadId, runIds } = await thread('c', ['hello']);
    // A user message stored as the run's answer (as a message sent while it waited would be).
    const [answer] = await db.query<{ id: string }>(
      `insert into agent_kit_messages (thread_id, run_id, role, content) values ($1, $2, 'user', '{"text": "yes"}') returning id`,
      [threadId, runIds[0]]);
    const again = await regenerateTurn(db, { threadId, ownerId: 'ann', message: answer!.id });
    expect((await db.query<{ client_message_id: string }>(
      'select client_message_id from agent_kit_messages where id = $1', [again.messageId]))[0]!.client_message_id).toBe('c1');
    expect((await listThreadMessages(db, threadId)).map((m) => m.text)).toEqual(['hello']);
    // An answer is not edited: its turn's question would not be asked again.
    const [answer2] = await db.query<{ id: string }>(
      `insert into agent_kit_messages (thread_id, run_id, role, content) values ($1, $2, 'user', '{"text": "yes"}') returning id`,
      [threadId, again.runId]);
    await run(again.runId);
    await expect(regenerateTurn(db, { threadId, ownerId: 'ann', message: answer2!.id, text: 'no' }))
      .rejects.toThrow(/answered a question of its turn: it is not edited/);
  });

  it('with another text, edits the message: the new run answers the edit, under the client id the old message had', async () => {
    const { threadId, runIds } = await thread('f', ['one', 'two', 'three']);
    const edited = await regenerateTurn(db, { threadId, ownerId: 'ann', message: 'f2', text: 'two, said better' });
    expect(edited.superseded).toEqual(runIds.slice(1));
    const [event] = (await readEvents(db, { threadId })).filter((e) => e.type === 'turn-regenerated');
    expect(event!.data).toMatchObject({ messageId: edited.messageId, text: 'two, said better', edited: true });
    expect(await run(edited.runId)).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(said(prompts.at(-1)!).filter((line) => line.startsWith('user'))).toEqual(['user: one', 'user: two, said better']);
    const messages = await listThreadMessages(db, threadId);
    expect(messages.map((m) => [m.role, m.role === 'user' ? m.text : m.runId])).toEqual([
      ['user', 'one'], ['assistant', runIds[0]], ['user', 'two, said better'], ['assistant', edited.runId],
    ]);
    expect(messages[2]).toMatchObject({ id: edited.messageId, clientMessageId: 'f2', runId: edited.runId });
    // The old message stays with its superseded turn, without the client id.
    expect(await db.query(`select content->>'text' as text, client_message_id from agent_kit_messages
      where run_id = $1 and role = 'user'`, [runIds[1]])).toEqual([{ text: 'two', client_message_id: null }]);
    // Named by its client id again, it is the edit, and the same text regenerates it.
    const again = await regenerateTurn(db, { threadId, ownerId: 'ann', message: 'f2', text: 'two, said better' });
    expect([again.messageId, again.superseded]).toEqual([edited.messageId, [edited.runId]]);
  });

  it('refuses, writing nothing: a turn under way, another owner, an unknown message, bad ids and texts', async () => {
    const { threadId } = await thread('d', ['done']);
    const queued = await startTurn(db, { threadId, ownerId: 'ann', text: 'not yet', clientMessageId: 'd2' });
    const rows = async () => [
      await count('agent_kit_runs'), await count('agent_kit_messages'), await count('agent_kit_thread_events'), await count('agent_kit_jobs'),
      await db.query('select id from agent_kit_runs where superseded_by is not null'),
    ];
    const before = await rows();
    const refusals: Array<[Parameters<typeof regenerateTurn>[1], unknown]> = [
      [{ threadId, ownerId: 'ann', message: 'd1' }, ConflictError], // turn 2 is queued behind it
      [{ threadId, ownerId: 'ann', message: 'd2' }, ConflictError], // its own turn is queued
      [{ threadId, ownerId: 'eve', message: 'd1' }, NotFoundError],
      [{ threadId, ownerId: 'ann', message: 'nope' }, NotFoundError],
      [{ threadId, ownerId: 'ann', message: crypto.randomUUID() }, NotFoundError],
      [{ threadId: crypto.randomUUID(), ownerId: 'ann', message: 'd1' }, NotFoundError],
      [{ threadId, ownerId: 'ann', message: '' }, InvalidArgumentError],
      [{ threadId: 'nope', ownerId: 'ann', message: 'd1' }, InvalidArgumentError],
      [{ threadId, ownerId: ' ', message: 'd1' }, InvalidArgumentError],
      [{ threadId, ownerId: 'ann', message: 'd1', text: ' ' }, InvalidArgumentError],
      [{ threadId, ownerId: 'ann', message: 'd1', text: 'x'.repeat(32_001) }, InvalidArgumentError],
    ];
    for (const [options, error] of refusals) {
      await expect(regenerateTurn(db, options), JSON.stringify(options)).rejects.toBeInstanceOf(error);
    }
    expect(await rows()).toEqual(before);
    expect(await run(queued.runId)).toMatchObject({ kind: 'closed' });
    // Now every turn from it on has ended: it goes.
    await expect(regenerateTurn(db, { threadId, ownerId: 'ann', message: 'd1', text: 'done' })).resolves.toMatchObject({ threadId });
  });
});

describe.runIf(onPostgres)('on Postgres', () => {
  it('two regenerations of one turn at once make one new run; the other is a conflict', async () => {
    const { threadId } = await thread('e', ['race me']);
    const results = await Promise.allSettled([1, 2, 3].map(() => regenerateTurn(db, { threadId, ownerId: 'ann', message: 'e1' })));
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ConflictError);
    expect((await listThreadRuns(db, threadId)).map((r) => r.status)).toEqual(['queued']);
  });
});
