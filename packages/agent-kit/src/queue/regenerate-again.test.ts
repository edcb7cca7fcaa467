// A regeneration that names the reply it replaces (ADR-0092), on both stores: the same call again
// (its response lost, or another page asking the same reply again) is answered with the run it
// made and writes nothing, while that run is queued and once it has ended; a reply replaced
// otherwise since is a conflict. On Postgres, three such calls at once make one run and all get
// it, and a regeneration racing a new message leaves a line of turns whichever goes first.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb, onPostgres } from '../../test/harness/test-db.js';
import { numberedRepliesModel } from '../../test/harness/steps-model.js';
import { answeredThread, makeRuntime } from '../../test/harness/turn-kit.js';
import { ConflictError, InvalidArgumentError, NotFoundError } from '../errors.js';
import { listThreadMessages, listThreadRuns } from '../event-log/read-threads.js';
import type { Db } from '../store/db.js';
import { runSegment } from '../turn/run-segment.js';
import { regenerateTurn } from './regenerate-turn.js';
import { startTurn } from './start-turn.js';

let db: Db;
const model = numberedRepliesModel([]);

beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

const run = (runId: string) => runSegment(makeRuntime(db, { model }), { runId, owner: 'w' });

const thread = (prefix: string, texts: string[]) => answeredThread(db, run, prefix, texts);

/** Everything a regeneration writes, of one thread: a call that writes nothing leaves it equal. */
async function written(threadId: string) {
  const [counts] = await db.query(
    `select (select count(*)::int from agent_kit_runs where thread_id = $1) as runs,
            (select count(*)::int from agent_kit_messages where thread_id = $1) as messages,
            (select count(*)::int from agent_kit_thread_events where thread_id = $1) as events,
            (select count(*)::int from agent_kit_jobs j join agent_kit_runs r on r.id = j.run_id where r.thread_id = $1) as jobs,
            (select last_seq from agent_kit_threads where id = $1) as last_seq`, [threadId]);
  return { counts, runs: await db.query('select id, superseded_by, status from agent_kit_runs where thread_id = $1 order by turn_no', [threadId]) };
}

describe('regenerateTurn with replaces', () => {
  it('the same call again returns the run it made, queued or ended, and writes nothing', async () => {
    const { threadId, runIds } = await thread('a', ['one', 'two']);
    const call = { threadId, ownerId: 'ann', message: 'a2', replaces: runIds[1]! };
    const first = await regenerateTurn(db, call);
    expect(first).toMatchObject({ created: true, superseded: [runIds[1]] });

    const before = await written(threadId);
    expect(await regenerateTurn(db, call)).toEqual({ ...first, created: false });
    expect(await written(threadId)).toEqual(before);

    expect(await run(first.runId)).toMatchObject({ kind: 'closed', status: 'completed' });
    const ended = await written(threadId);
    // With the text it had, as a page sends it: still the same call.
    expect(await regenerateTurn(db, { ...call, text: 'two' })).toEqual({ ...first, created: false });
    expect(await written(threadId)).toEqual(ended);

    // Naming the reply it has now asks again; the first call, sent once more, is then a conflict.
    const second = await regenerateTurn(db, { ...call, replaces: first.runId });
    expect(second).toMatchObject({ created: true, superseded: [first.runId], messageId: first.messageId });
    await expect(regenerateTurn(db, call)).rejects.toThrow(/no longer run .*: it was regenerated, edited or replaced since/);
    // Without replaces, every call regenerates (ADR-0091's behaviour).
    await run(second.runId);
    await expect(regenerateTurn(db, { threadId, ownerId: 'ann', message: 'a2' })).resolves.toMatchObject({ created: true });
  });

  it('an edit sent again is the same edit; another text is a conflict', async () => {
    const { threadId, runIds } = await thread('b', ['one', 'two', 'three']);
    const edit = { threadId, ownerId: 'ann', message: 'b2', text: 'two, said better', replaces: runIds[1]! };
    const first = await regenerateTurn(db, edit);
    expect(first).toMatchObject({ created: true, superseded: runIds.slice(1) });
    await run(first.runId);
    const before = await written(threadId);
    expect(await regenerateTurn(db, edit)).toEqual({ ...first, created: false });
    expect(await written(threadId)).toEqual(before);
    await expect(regenerateTurn(db, { ...edit, text: 'two, said otherwise' })).rejects.toBeInstanceOf(ConflictError);
    // Named by the old message's stored id (it stayed with its turn): the same edit is this one,
    // and asking that message's turn again as it was is not.
    const [old] = await db.query<{ id: string }>(`select id from agent_kit_messages where run_id = $1 and role = 'user'`, [runIds[1]]);
    expect(await regenerateTurn(db, { ...edit, message: old!.id })).toEqual({ ...first, created: false });
    await expect(regenerateTurn(db, { ...edit, message: old!.id, text: undefined })).rejects.toBeInstanceOf(ConflictError);
    await expect(regenerateTurn(db, { ...edit, message: old!.id, text: 'two' })).rejects.toBeInstanceOf(ConflictError);
    expect(await written(threadId)).toEqual(before);
    expect((await listThreadMessages(db, threadId)).filter((m) => m.role === 'user').map((m) => m.text)).toEqual(['one', 'two, said better']);
  });

  it('an answer that names its turn: the same call again finds the run that replaced the turn', async () => {
    const { threadId, runIds } = await thread('c', ['hello']);
    const [answer] = await db.query<{ id: string }>(
      `insert into agent_kit_messages (thread_id, run_id, role, content) values ($1, $2, 'user', '{"text": "yes"}') returning id`,
      [threadId, runIds[0]]);
    const call = { threadId, ownerId: 'ann', message: answer!.id, replaces: runIds[0]! };
    const first = await regenerateTurn(db, call);
    expect(first.created).toBe(true);
    // The answer stays with its superseded turn; the call again is still this regeneration.
    expect(await regenerateTurn(db, call)).toEqual({ ...first, created: false });

    // An edit of the turn's message is not an edit of its answer to the same text.
    const other = await thread('c2-', ['hello']);
    const [answer2] = await db.query<{ id: string }>(
      `insert into agent_kit_messages (thread_id, run_id, role, content) values ($1, $2, 'user', '{"text": "yes"}') returning id`,
      [other.threadId, other.runIds[0]]);
    const edit = { threadId: other.threadId, ownerId: 'ann', message: 'c2-1', text: 'hello there', replaces: other.runIds[0]! };
    const edited = await regenerateTurn(db, edit);
    await expect(regenerateTurn(db, { ...edit, message: answer2!.id })).rejects.toBeInstanceOf(ConflictError);
    expect(await regenerateTurn(db, edit)).toEqual({ ...edited, created: false });
  });

  it('a turn replaced by an earlier one\'s regeneration, a reply that is not the message\'s, a run of another thread: refused', async () => {
    const { threadId, runIds } = await thread('d', ['one', 'two', 'three']);
    const other = await thread('e', ['elsewhere']);
    await expect(regenerateTurn(db, { threadId, ownerId: 'ann', message: 'd2', replaces: runIds[0]! })).rejects.toBeInstanceOf(ConflictError);
    await expect(regenerateTurn(db, { threadId, ownerId: 'ann', message: 'd2', replaces: other.runIds[0]! })).rejects.toBeInstanceOf(NotFoundError);
    await expect(regenerateTurn(db, { threadId, ownerId: 'ann', message: 'd2', replaces: 'run-2' })).rejects.toBeInstanceOf(InvalidArgumentError);
    const before = await written(threadId);
    expect(before.runs.every((r) => (r as { superseded_by: string | null }).superseded_by === null)).toBe(true);

    const earlier = await regenerateTurn(db, { threadId, ownerId: 'ann', message: 'd1', replaces: runIds[0]! });
    expect(earlier.superseded).toEqual(runIds);
    // Turn 3 was superseded by turn 1's new run, which did not regenerate it: not this call's run.
    await expect(regenerateTurn(db, { threadId, ownerId: 'ann', message: 'd3', replaces: runIds[2]! })).rejects.toBeInstanceOf(ConflictError);
    expect((await listThreadRuns(db, threadId)).map((r) => r.id)).toEqual([earlier.runId]);
  });
});

describe.runIf(onPostgres)('on Postgres', () => {
  it('three calls at once that name one reply make one run, and each gets it', async () => {
    const { threadId, runIds } = await thread('f', ['race me']);
    const results = await Promise.all([1, 2, 3].map(() => regenerateTurn(db, { threadId, ownerId: 'ann', message: 'f1', replaces: runIds[0]! })));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.runId)).size).toBe(1);
    expect((await listThreadRuns(db, threadId)).map((r) => [r.id, r.status])).toEqual([[results[0]!.runId, 'queued']]);
  });

  it('a regeneration and a new message at once: one goes first, and the thread is a line of turns either way', async () => {
    for (let i = 0; i < 12; i++) {
      const { threadId, runIds } = await thread(`g${i}-`, ['first']);
      const [regenerated, sent] = await Promise.allSettled([
        regenerateTurn(db, { threadId, ownerId: 'ann', message: `g${i}-1`, replaces: runIds[0]! }),
        startTurn(db, { threadId, ownerId: 'ann', text: 'second', clientMessageId: `g${i}-2` }),
      ]);
      expect(sent.status).toBe('fulfilled'); // a message is never refused for a regeneration
      const runs = await listThreadRuns(db, threadId);
      const turns = (await db.query<{ turn_no: number; n: number }>(
        `select r.turn_no, (select count(*)::int from agent_kit_messages m where m.run_id = r.id and m.role = 'user') as n
         from agent_kit_runs r where r.thread_id = $1 and r.superseded_by is null order by r.turn_no`, [threadId]));
      expect(turns.every((t) => t.n === 1)).toBe(true); // each turn of the conversation has its message
      if (regenerated.status === 'fulfilled') {
        // It went first: the message's turn comes after the new run, and both stay.
        expect(runs.map((r) => r.id)).toEqual([regenerated.value.runId, (sent as PromiseFulfilledResult<{ runId: string }>).value.runId]);
      } else {
        // The message went first: its turn was queued after the one to regenerate, which is refused.
        expect(regenerated.reason).toBeInstanceOf(ConflictError);
        expect(runs.map((r) => r.id)).toEqual([runIds[0], (sent as PromiseFulfilledResult<{ runId: string }>).value.runId]);
      }
    }
  });
});
