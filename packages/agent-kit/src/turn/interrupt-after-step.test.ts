// A cancel or takeover that the mirror's last write sees after the model finished its step (the
// write was still in flight when the stream ended) leaves the lease held: the finished step is
// journalled all the same, starting no effect and closing nothing, and then the interrupt is
// honoured. So a released run does not ask the model for that step again, and a cancelled run's
// message keeps all of the step's text. Both stores; and the mirror's part of it on its own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chargeTool, gate, makeRuntime } from '../../test/harness/turn-kit.js';
import { mockUsage } from '../../test/harness/mock-streams.js';
import { openTestDb } from '../../test/harness/test-db.js';
import type { Lease } from '../lease/lease.js';
import type { LanguageModelV3 } from '../model/index.js';
import type { ModelStreamPart } from '../model/provider-types.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db, Queryable } from '../store/db.js';
import { loadJournal } from './journal.js';
import { runSegment } from './run-segment.js';
import { StreamMirror } from './stream-mirror.js';

let db: Db;
beforeAll(async () => { db = await openTestDb(); });
afterAll(async () => { await db.close(); });

type Interrupt = 'cancel' | 'takeover';
const requestSql: Record<Interrupt, string> = {
  cancel: 'select agent_kit_request_cancel($1)',
  takeover: `select agent_kit_takeover_run($1, 'op')`,
};

/**
 * The first mirror write of the run asks for `interrupt` just before it goes out (so it sees it),
 * and its answer is held until the model's stream has ended and a timer turn has passed: the
 * write is in flight while the step is finished and handed to its commit.
 */
function interruptingDb(runId: string, interrupt: Interrupt, streamEnded: Promise<void>, writeSent: () => void): Db {
  let first = true;
  return Object.create(db, {
    query: {
      value: async (sql: string, params?: readonly unknown[]) => {
        if (!first || !/agent_kit_mirror_/.test(sql)) return db.query(sql, params);
        first = false;
        await db.query(requestSql[interrupt], [runId]);
        const rows = await db.query(sql, params);
        writeSent();
        await streamEnded;
        await new Promise((resolve) => setTimeout(resolve, 50));
        return rows;
      },
    },
  }) as Db;
}

/**
 * A model whose first step streams "Let me pay. ", waits for the mirror's write of it to go out,
 * then asks for a charge (or, `answerOnly`, ends the turn with more text); every later step
 * answers "Paid.". Counts the steps it is asked for.
 */
function payingModel(o: { writeSent: Promise<void>; ended: () => void; answerOnly?: boolean }, asked: { n: number }): LanguageModelV3 {
  const start = { type: 'stream-start', warnings: [] };
  const finish = (unified: string) => ({ type: 'finish', finishReason: { unified, raw: unified }, usage: mockUsage });
  return {
    specificationVersion: 'v3', provider: 'test', modelId: 'paying', supportedUrls: {},
    doGenerate: () => Promise.reject(new Error('stream only')),
    async doStream() {
      const n = asked.n++;
      const parts: ModelStreamPart[][] = n > 0
        ? [[start, { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'Paid.' }, { type: 'text-end', id: 't' }, finish('stop')] as ModelStreamPart[]]
        : [
          [start, { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'Let me pay. ' }] as ModelStreamPart[],
          (o.answerOnly
            ? [{ type: 'text-delta', id: 't', delta: 'It is done.' }, { type: 'text-end', id: 't' }, finish('stop')]
            : [{ type: 'text-end', id: 't' }, { type: 'tool-call', toolCallId: 'c1', toolName: 'charge_card', input: '{"cents":5000}' }, finish('tool-calls')]
          ) as ModelStreamPart[],
        ];
      return {
        stream: new ReadableStream<ModelStreamPart>({
          async start(controller) {
            for (const part of parts[0]!) controller.enqueue(part);
            if (parts.length > 1) {
              await o.writeSent;
              for (const part of parts[1]!) controller.enqueue(part);
              o.ended();
            }
            controller.close();
          },
        }),
      };
    },
  } as unknown as LanguageModelV3;
}


async function setUp(text: string, interrupt: Interrupt, answerOnly = false) {
  const turn = await startTurn(db, { ownerId: 'u', text });
  const sent = gate();
  const ended = gate();
  const asked = { n: 0 };
  const charged: string[] = [];
  const rt = makeRuntime(interruptingDb(turn.runId, interrupt, ended.wait(), sent.open), {
    model: payingModel({ writeSent: sent.wait(), ended: ended.open, answerOnly }, asked),
    tools: { charge_card: chargeTool(charged) },
    // Only the step's first text goes out on its own; what follows waits for the commit.
    settings: { mirrorIntervalMs: 60_000 },
  });
  return { turn, rt, asked, charged };
}

const effects = (runId: string) => db.query<{ key: string; status: string }>('select key, status from agent_kit_effects where run_id = $1', [runId]);

describe('an interrupt seen by the mirror\'s last write of a finished step', () => {
  it('a takeover journals the step, starts no effect, parks; the release runs the call once without asking the model for the step again', async () => {
    const { turn, rt, asked, charged } = await setUp('pay the rent, held late', 'takeover');
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'parked', status: 'waiting_takeover' });
    expect(asked.n).toBe(1);
    const journal = await loadJournal(db, turn.runId);
    expect(journal.map((step) => step.kind)).toEqual(['model']);
    expect(charged).toEqual([]);
    expect(await effects(turn.runId)).toEqual([]);

    await db.query('select agent_kit_release_run($1)', [turn.runId]);
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(asked.n).toBe(2); // the charge's step was not asked again: only the answer after its result
    expect(charged).toEqual([`${turn.runId}:0:0`]);
    expect(await effects(turn.runId)).toEqual([{ key: `${turn.runId}:0:0`, status: 'completed' }]);
    const [message] = await db.query<{ text: string }>(
      `select m.content->>'text' as text from agent_kit_runs r join agent_kit_messages m on m.id = r.message_id where r.id = $1`, [turn.runId],
    );
    expect(message!.text).toBe('Let me pay. Paid.');
  });

  it('a takeover of a step that ends the turn keeps it; the release closes the run with no model call', async () => {
    const { turn, rt, asked } = await setUp('answer me, held late', 'takeover', true);
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'parked', status: 'waiting_takeover' });
    await db.query('select agent_kit_release_run($1)', [turn.runId]);
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w2' })).toMatchObject({ kind: 'closed', status: 'completed' });
    expect(asked.n).toBe(1);
    const [run] = await db.query<{ text: string; partial: boolean }>(
      `select m.content->>'text' as text, m.partial from agent_kit_runs r join agent_kit_messages m on m.id = r.message_id where r.id = $1`, [turn.runId],
    );
    expect(run).toEqual({ text: 'Let me pay. It is done.', partial: false });
  });

  it('a cancel closes the run aborted with all of the step\'s text and no call run', async () => {
    const { turn, rt, asked, charged } = await setUp('answer me, cancelled late', 'cancel', true);
    expect(await runSegment(rt, { runId: turn.runId, owner: 'w1' })).toMatchObject({ kind: 'closed', status: 'aborted' });
    expect(asked.n).toBe(1);
    expect(charged).toEqual([]);
    const [run] = await db.query<{ text: string }>(
      `select m.content->>'text' as text from agent_kit_runs r join agent_kit_messages m on m.id = r.message_id where r.id = $1`, [turn.runId],
    );
    expect(run!.text).toBe('Let me pay. It is done.');
  });
});

describe('the stream mirror stopped by an interrupt', () => {
  const lease: Lease = {
    runId: 'r', threadId: 't', owner: 'o', fence: 1, attempts: 1, expiresAt: new Date(8.64e15), deadlineAt: new Date(8.64e15),
  };

  /** A store whose mirror writes are held until `release`, then answer with `interrupt`. */
  function heldStore(interrupt: Interrupt) {
    const held = gate();
    const writes: unknown[][] = [];
    const store: Queryable = {
      async query<T>(sql: string, params: readonly unknown[] = []) {
        const fn = /agent_kit_mirror_\w+/.exec(sql)?.[0];
        if (!fn) return [] as T[]; // the notification after a write
        writes.push([fn, ...params.slice(3)]);
        await held.wait();
        return [{ seq: writes.length, interrupt }] as T[];
      },
    };
    return { store, writes, release: held.open };
  }

  it('keeps the text that came while its last write was in flight, and hands it to the commit with the interrupt', async () => {
    const { store, writes, release } = heldStore('takeover');
    const stops: string[] = [];
    const mirror = new StreamMirror(store, lease, 0, (reason) => stops.push(reason));
    mirror.push('first ');
    await new Promise((resolve) => setTimeout(resolve, 5)); // the first batch goes out at once
    mirror.push('second');
    const taken = mirror.takeForCommit();
    release();
    expect(await taken).toEqual({ delta: 'second', interrupt: 'takeover' });
    expect(stops).toEqual(['takeover']);
    expect(writes).toEqual([['agent_kit_mirror_partial', 'first ']]);
    expect(mirror.writtenText).toBe('first ');
    mirror.push('ignored');
    expect(await mirror.flush()).toBe('takeover');
    expect(writes).toHaveLength(1);
  });

  it('still stops the step when reasoning is left unwritten (its commit cannot hold it)', async () => {
    const { store, release } = heldStore('cancel');
    const mirror = new StreamMirror(store, lease, 0, () => {});
    mirror.push('first ');
    await new Promise((resolve) => setTimeout(resolve, 5));
    mirror.pushReasoning('a thought');
    mirror.push('after it');
    const taken = mirror.takeForCommit();
    release();
    expect(await taken).toEqual({ stopped: 'cancel' });
  });
});
