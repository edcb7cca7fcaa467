// agent_kit_commit_step (migrations 0012, 0016) on both stores: the step boundary's one write
// mirrors the last text, finishes the effect, journals the step, closes the run or starts the next
// tool call's effect under one guard, or writes nothing at all; and a fresh scripted turn now
// costs a fixed, small number of statements.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { finalMessage, makeRuntime } from '../../test/harness/turn-kit.js';
import { createScriptedModel, scriptedReplyText, type LanguageModelV3 } from '../model/index.js';
import { startEffect } from '../effect-ledger/index.js';
import { claimRun, type Lease } from '../lease/lease.js';
import { startTurn } from '../queue/start-turn.js';
import type { Db } from '../store/db.js';
import { commitStep, type Step, type ToolCall } from './journal.js';
import { runSegment } from './run-segment.js';

let db: Db;
beforeAll(async () => {
  db = await openTestDb();
});
afterAll(async () => {
  await db.close();
});

async function claimedTurn(text = 'hello'): Promise<{ lease: Lease; threadId: string }> {
  const turn = await startTurn(db, { ownerId: 'user-1', text });
  const result = await claimRun(db, { runId: turn.runId, owner: 'w1', leaseTtlMs: 30_000 });
  if (!result.claimed) throw new Error(`expected a claim, got ${result.reason}`);
  return { lease: result.lease, threadId: turn.threadId };
}

const modelStep = (stepNo: number, text: string, toolCalls: ToolCall[] = []): Step => ({
  kind: 'model', stepNo, text, toolCalls, finishReason: toolCalls.length ? 'tool-calls' : 'stop',
});
const stepEvent = (step: Step) => ({ type: 'step-finished', data: { stepNo: step.stepNo } });

async function eventTypes(threadId: string) {
  const rows = await db.query<{ type: string; data: Record<string, unknown> }>(
    `select type, data from agent_kit_thread_events where thread_id = $1 and type <> 'run-queued' order by seq`,
    [threadId],
  );
  return rows;
}

async function runRow(runId: string) {
  const [row] = await db.query<{ status: string; partial: string; message_id: string | null }>(
    'select status, partial, message_id from agent_kit_runs where id = $1',
    [runId],
  );
  return row!;
}

describe('agent_kit_commit_step', () => {
  it('mirrors the delta before journalling the step, each with its event, and reports no interrupt', async () => {
    const { lease, threadId } = await claimedTurn();
    const before = (await eventTypes(threadId)).length;
    const step = modelStep(0, 'Hello there');
    const result = await commitStep(db, lease, step, stepEvent(step), { delta: 'there' });
    expect(result).toMatchObject({ ok: true, interrupt: null, messageId: null });
    const events = (await eventTypes(threadId)).slice(before);
    expect(events.map((e) => e.type)).toEqual(['text-delta', 'step-finished']);
    expect(events[0]!.data).toEqual({ text: 'there' });
    expect((await runRow(lease.runId)).partial).toBe('there');
    const steps = await db.query<{ step_no: number; kind: string; fence: number; data: { text: string } }>(
      'select step_no, kind, fence, data from agent_kit_steps where run_id = $1', [lease.runId],
    );
    expect(steps).toEqual([{ step_no: 0, kind: 'model', fence: 1, data: { text: 'Hello there', toolCalls: [], finishReason: 'stop' } }]);
  });

  it('writes no text-delta for an empty delta', async () => {
    const { lease, threadId } = await claimedTurn();
    const before = (await eventTypes(threadId)).length;
    const step = modelStep(0, 'x');
    expect((await commitStep(db, lease, step, stepEvent(step), { delta: '' })).ok).toBe(true);
    expect((await eventTypes(threadId)).slice(before).map((e) => e.type)).toEqual(['step-finished']);
  });

  it('closes the run with the step when asked: message, run-closed event, one transaction', async () => {
    const { lease, threadId } = await claimedTurn();
    const step = modelStep(0, 'All done.');
    const result = await commitStep(db, lease, step, stepEvent(step), {
      delta: 'All done.', close: { status: 'completed', message: { text: 'All done.' } },
    });
    expect(result.ok && result.messageId).toMatch(/^[0-9a-f-]{36}$/);
    const run = await runRow(lease.runId);
    expect(run.status).toBe('completed');
    expect(run.message_id).toBe(result.ok ? result.messageId : null);
    const types = (await eventTypes(threadId)).map((e) => e.type);
    expect(types.slice(-3)).toEqual(['text-delta', 'step-finished', 'run-closed']);
  });

  it('finishes the tool call\'s effect with its step', async () => {
    const { lease } = await claimedTurn();
    const key = `${lease.runId}:0:0`;
    expect((await startEffect(db, lease, key, 'record_effect', { note: 'n' }))?.status).toBe('started');
    const step: Step = { kind: 'tool', stepNo: 1, toolCallId: 'c1', toolName: 'record_effect', outcome: 'completed', output: { ok: 1 } };
    const result = await commitStep(db, lease, step, { type: 'tool-result', data: {} }, {
      effect: { key, status: 'completed', result: { ok: 1 } },
    });
    expect(result.ok).toBe(true);
    const [effect] = await db.query<{ status: string; result: unknown; finished_at: Date | null }>(
      'select status, result, finished_at from agent_kit_effects where run_id = $1', [lease.runId],
    );
    expect(effect).toMatchObject({ status: 'completed', result: { ok: 1 } });
    expect(effect!.finished_at).not.toBeNull();
  });

  it('with a stale fence writes nothing: no partial, event, step, effect or close', async () => {
    const { lease, threadId } = await claimedTurn();
    const key = `${lease.runId}:0:0`;
    await startEffect(db, lease, key, 'record_effect', {});
    const before = JSON.stringify([await runRow(lease.runId), await eventTypes(threadId)]);
    const stale = { ...lease, fence: lease.fence - 1 };
    const step = modelStep(0, 'zombie');
    const result = await commitStep(db, stale, step, stepEvent(step), {
      delta: 'zombie', effect: { key, status: 'completed', result: 1 }, close: { status: 'completed', message: { text: 'zombie' } },
    });
    expect(result).toEqual({ ok: false });
    expect(JSON.stringify([await runRow(lease.runId), await eventTypes(threadId)])).toBe(before);
    expect(await db.query('select 1 from agent_kit_steps where run_id = $1', [lease.runId])).toEqual([]);
    const [effect] = await db.query<{ status: string }>('select status from agent_kit_effects where run_id = $1', [lease.runId]);
    expect(effect!.status).toBe('started');
  });

  it('reports a pending cancel, then takeover, as the step boundary\'s interrupt', async () => {
    const { lease } = await claimedTurn();
    await db.query('update agent_kit_runs set takeover_requested_at = now() where id = $1', [lease.runId]);
    const first = modelStep(0, 'a', [{ toolCallId: 'c', toolName: 't', input: {} }]);
    expect(await commitStep(db, lease, first, stepEvent(first))).toMatchObject({ ok: true, interrupt: 'takeover' });
    await db.query('select agent_kit_request_cancel($1)', [lease.runId]);
    const second: Step = { kind: 'tool', stepNo: 1, toolCallId: 'c', toolName: 't', outcome: 'invalid', output: 'x' };
    expect(await commitStep(db, lease, second, stepEvent(second))).toMatchObject({ ok: true, interrupt: 'cancel' });
  });

  it('journals a turn-ending step but does not close over a pending cancel or takeover', async () => {
    const { lease } = await claimedTurn();
    await db.query(`select agent_kit_takeover_run($1, 'op')`, [lease.runId]);
    const step = modelStep(0, 'Done.');
    const result = await commitStep(db, lease, step, stepEvent(step), {
      delta: 'Done.', close: { status: 'completed', message: { text: 'Done.' } },
    });
    expect(result).toMatchObject({ ok: true, interrupt: 'takeover', messageId: null });
    expect(await runRow(lease.runId)).toMatchObject({ status: 'running', partial: 'Done.', message_id: null });
    expect(await db.query('select step_no from agent_kit_steps where run_id = $1', [lease.runId])).toEqual([{ step_no: 0 }]);
  });

  it('writes nothing when the reaper already settled the effect (the lease expired while the tool ran)', async () => {
    const { lease, threadId } = await claimedTurn();
    const key = `${lease.runId}:0:0`;
    await startEffect(db, lease, key, 'record_effect', {});
    await db.query(`update agent_kit_effects set status = 'completed', result = '"from reconcile"' where run_id = $1`, [lease.runId]);
    const before = (await eventTypes(threadId)).length;
    const step: Step = { kind: 'tool', stepNo: 1, toolCallId: 'c1', toolName: 'record_effect', outcome: 'completed', output: 'late' };
    const result = await commitStep(db, lease, step, { type: 'tool-result', data: {} }, {
      delta: 'late text', effect: { key, status: 'completed', result: 'late' },
    });
    expect(result).toEqual({ ok: false });
    expect((await eventTypes(threadId)).length).toBe(before);
    expect((await runRow(lease.runId)).partial).toBe('');
    expect(await db.query('select 1 from agent_kit_steps where run_id = $1', [lease.runId])).toEqual([]);
    const [effect] = await db.query<{ result: unknown }>('select result from agent_kit_effects where run_id = $1', [lease.runId]);
    expect(effect!.result).toBe('from reconcile');
  });

  it('overwrites an in_doubt effect with what the tool really returned', async () => {
    const { lease } = await claimedTurn();
    const key = `${lease.runId}:0:0`;
    await startEffect(db, lease, key, 'record_effect', {});
    await db.query(`update agent_kit_effects set status = 'in_doubt' where run_id = $1`, [lease.runId]);
    const step: Step = { kind: 'tool', stepNo: 1, toolCallId: 'c1', toolName: 'record_effect', outcome: 'completed', output: 7 };
    expect((await commitStep(db, lease, step, { type: 'tool-result', data: {} }, { effect: { key, status: 'completed', result: 7 } })).ok)
      .toBe(true);
    const [effect] = await db.query<{ status: string; result: unknown }>('select status, result from agent_kit_effects where run_id = $1', [lease.runId]);
    expect(effect).toEqual({ status: 'completed', result: 7 });
  });

  it('rejects a bad effect status with a clear error and writes nothing', async () => {
    const { lease, threadId } = await claimedTurn();
    const before = (await eventTypes(threadId)).length;
    const step = modelStep(0, 'x');
    await expect(commitStep(db, lease, step, stepEvent(step), {
      delta: 'x', effect: { key: 'k', status: 'started' as 'completed', result: null },
    })).rejects.toThrow(/completed, failed or in_doubt/);
    expect((await eventTypes(threadId)).length).toBe(before);
    expect((await runRow(lease.runId)).partial).toBe('');
    expect(await db.query('select 1 from agent_kit_steps where run_id = $1', [lease.runId])).toEqual([]);
  });
});

/** The scripted model, calling `before` as each stream starts (e.g. to request a cancel). */
function modelWithHook(before: () => Promise<unknown>): LanguageModelV3 {
  const inner = createScriptedModel({ tokens: 6 });
  return { ...inner, doGenerate: (o) => inner.doGenerate(o), doStream: async (o) => (await before(), inner.doStream(o)) };
}

describe('an interrupt that arrives while the last step streams', () => {
  // The mirror does not write during these short steps (a long interval), so only the step's
  // commit can see the interrupt: it must be honoured, not closed over.
  const settings = { mirrorIntervalMs: 60_000 };

  it('a cancel closes the run aborted with the whole text it showed', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'cancel me late' });
    const model = modelWithHook(() => db.query('select agent_kit_request_cancel($1)', [turn.runId]));
    const outcome = await runSegment(makeRuntime(db, { model, settings }), { runId: turn.runId, owner: 'late-cancel' });
    expect(outcome).toMatchObject({ kind: 'closed', status: 'aborted' });
    const [message] = await finalMessage(db, turn.runId);
    expect(message).toEqual({ text: scriptedReplyText(['cancel me late'], 6), partial: true });
    const [content] = await db.query<{ cancelled: boolean }>(
      `select (content->>'cancelled')::boolean as cancelled from agent_kit_messages where run_id = $1 and role = 'assistant'`, [turn.runId],
    );
    expect(content!.cancelled).toBe(true);
  });

  it('a takeover parks the run, and after the release the turn closes with the journalled step', async () => {
    const turn = await startTurn(db, { ownerId: 'u', text: 'take me late' });
    const model = modelWithHook(() => db.query(`select agent_kit_takeover_run($1, 'op')`, [turn.runId]));
    const outcome = await runSegment(makeRuntime(db, { model, settings }), { runId: turn.runId, owner: 'late-takeover' });
    expect(outcome).toMatchObject({ kind: 'parked', status: 'waiting_takeover' });
    await db.query('select agent_kit_release_run($1)', [turn.runId]);
    const resumed = await runSegment(makeRuntime(db, { settings }), { runId: turn.runId, owner: 'after-release' });
    expect(resumed).toMatchObject({ kind: 'closed', status: 'completed', fence: 2 });
    const [message] = await finalMessage(db, turn.runId);
    expect(message!.text).toBe(scriptedReplyText(['take me late'], 6));
  });
});

describe('a fresh turn\'s statements', () => {
  it('a scripted turn with one tool call: claim (with begin and history), 3 step commits (the first starts the effect), and notifications', async () => {
    const statements: string[] = [];
    const counting: Db = Object.create(db, {
      query: { value: (sql: string, params?: readonly unknown[]) => (statements.push(sql), db.query(sql, params)) },
    });
    // The scripted model calls record_effect when asked to remember something, then answers.
    const rt = makeRuntime(counting, { settings: { mirrorIntervalMs: 60_000 } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'please remember this #effect' });
    const outcome = await runSegment(rt, { runId: turn.runId, owner: 'counted' });
    expect(outcome.kind).toBe('closed');
    await new Promise((resolve) => setTimeout(resolve, 50)); // let the last notification go out
    const kinds = statements.map((sql) => (sql.includes('agent_kit_claim_run(') ? 'claim' : /agent_kit_\w+|pg_notify/.exec(sql)?.[0] ?? sql.slice(0, 40)));
    const writes = kinds.filter((k) => k !== 'pg_notify');
    expect(writes).toEqual(['claim', 'agent_kit_commit_step', 'agent_kit_commit_step', 'agent_kit_commit_step']);
    const notifies = kinds.filter((k) => k === 'pg_notify').length;
    expect(notifies).toBeGreaterThanOrEqual(1);
    expect(notifies).toBeLessThanOrEqual(4);
    const [effects] = await db.query<{ n: number }>(
      `select count(*)::int as n from agent_kit_effects where run_id = $1 and status = 'completed'`, [turn.runId],
    );
    expect(effects!.n).toBe(1);
    const [started] = await db.query<{ data: Record<string, unknown> }>(
      `select data from agent_kit_thread_events where run_id = $1 and type = 'segment-started'`, [turn.runId],
    );
    expect(started!.data).toMatchObject({ continued: false, stepNo: 0, runId: turn.runId, fence: 1, attempt: 1, owner: 'counted', text: '' });
    expect(started!.data.leaseExpiresAt).toBeTruthy();
  });
});

/** The scripted model, but its tool-call step calls the tool twice (a second id, same input). */
function twoCallModel(): LanguageModelV3 {
  const inner = createScriptedModel({ tokens: 6 });
  return {
    ...inner,
    doGenerate: (o) => inner.doGenerate(o),
    async doStream(o) {
      const result = await inner.doStream(o);
      const doubled = result.stream.pipeThrough(new TransformStream({
        transform(part, controller) {
          controller.enqueue(part);
          if (part.type === 'tool-call') controller.enqueue({ ...part, toolCallId: `${part.toolCallId}-b` });
        },
      }));
      return { ...result, stream: doubled };
    },
  };
}

describe('starting the next effect with the step before it (migration 0016)', () => {
  const call: ToolCall = { toolCallId: 'c1', toolName: 'record_effect', input: { note: 'n' } };

  it('records the effect started under the fence, after the step, and returns its record', async () => {
    const { lease } = await claimedTurn();
    const key = `${lease.runId}:0:0`;
    const committed = await commitStep(db, lease, modelStep(0, '', [call]), stepEvent(modelStep(0, '', [call])), {
      start: { key, tool: 'record_effect', input: { note: 'n' } },
    });
    expect(committed).toMatchObject({ ok: true, started: { key, status: 'started', fence: lease.fence, result: null } });
    const rows = await db.query('select status, fence, tool, input from agent_kit_effects where run_id = $1', [lease.runId]);
    expect(rows).toEqual([{ status: 'started', fence: lease.fence, tool: 'record_effect', input: { note: 'n' } }]);
  });

  it('returns a record already there as it is, and writes nothing for a lost lease', async () => {
    const { lease } = await claimedTurn();
    const key = `${lease.runId}:0:0`;
    await startEffect(db, lease, key, 'record_effect', { note: 'first' });
    await db.query(`update agent_kit_effects set status = 'completed', result = '{"done":1}' where key = $1`, [key]);
    const committed = await commitStep(db, lease, modelStep(0, '', [call]), stepEvent(modelStep(0, '', [call])), {
      start: { key, tool: 'record_effect', input: { note: 'second' } },
    });
    expect(committed).toMatchObject({ ok: true, started: { status: 'completed', result: { done: 1 } } });

    const other = await claimedTurn();
    const lost = await commitStep(db, { ...other.lease, fence: other.lease.fence + 1 }, modelStep(0, '', [call]),
      stepEvent(modelStep(0, '', [call])), { start: { key: `${other.lease.runId}:0:0`, tool: 'record_effect', input: {} } });
    expect(lost).toEqual({ ok: false });
    expect(await db.query('select 1 from agent_kit_effects where run_id = $1', [other.lease.runId])).toEqual([]);
  });

  it('refuses to close and start an effect in the same write', async () => {
    const { lease } = await claimedTurn();
    await expect(commitStep(db, lease, modelStep(0, 'done'), stepEvent(modelStep(0, 'done')), {
      close: { status: 'completed', message: { text: 'done' } },
      start: { key: `${lease.runId}:0:0`, tool: 'record_effect', input: {} },
    })).rejects.toThrow(/closing step starts none/);
    expect((await runRow(lease.runId)).status).toBe('running');
  });

  it('two calls of one step: each effect starts with the step before it, runs once, and is finished with its own step', async () => {
    const statements: string[] = [];
    const counting: Db = Object.create(db, {
      query: { value: (sql: string, params?: readonly unknown[]) => (statements.push(sql), db.query(sql, params)) },
    });
    const rt = makeRuntime(counting, { model: twoCallModel(), settings: { mirrorIntervalMs: 60_000 } });
    const turn = await startTurn(db, { ownerId: 'u', text: 'remember twice #effect' });
    expect((await runSegment(rt, { runId: turn.runId, owner: 'two-calls' })).kind).toBe('closed');
    const writes = statements.map((sql) => (sql.includes('agent_kit_claim_run(') ? 'claim' : /agent_kit_\w+|pg_notify/.exec(sql)?.[0]))
      .filter((k) => k !== 'pg_notify');
    // claim; model step + start of call 0; tool step 0 + start of call 1; tool step 1; last step + close.
    expect(writes).toEqual(['claim', 'agent_kit_commit_step', 'agent_kit_commit_step', 'agent_kit_commit_step', 'agent_kit_commit_step']);
    const effects = await db.query<{ key: string; status: string; fence: number }>(
      'select key, status, fence from agent_kit_effects where run_id = $1 order by key', [turn.runId],
    );
    expect(effects).toEqual([
      { key: `${turn.runId}:0:0`, status: 'completed', fence: 1 },
      { key: `${turn.runId}:0:1`, status: 'completed', fence: 1 },
    ]);
    const steps = await db.query<{ kind: string; outcome: string | null }>(
      `select kind, data->>'outcome' as outcome from agent_kit_steps where run_id = $1 order by step_no`, [turn.runId],
    );
    expect(steps).toEqual([
      { kind: 'model', outcome: null }, { kind: 'tool', outcome: 'completed' }, { kind: 'tool', outcome: 'completed' },
      { kind: 'model', outcome: null },
    ]);
  });
});
