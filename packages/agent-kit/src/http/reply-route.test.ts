// POST /api/runs/:id/reply (ADR-0114): an operator answers in a held run's place. The run closes
// completed with the operator's text; the thread's read, its replay, a useChat page opened from
// the read and the AI SDK stream of a viewer all show it and name the operator. The thread's
// owner (not an operator) gets 403, another user 404, a run not held 409, a bad body 400: each
// writing nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, makeRequest, openHttpTest, payload, readSse, type HttpTest } from '../../test/harness/http-harness.js';
import { toUIMessages, type ThreadRead } from '../client/thread-read.js';
import { startTurn } from '../queue/start-turn.js';

let t: HttpTest;
beforeAll(async () => {
  t = await openHttpTest();
});
afterAll(async () => {
  await t.close();
});

const send = (method: string, path: string, options: { user?: string; body?: unknown; raw?: string; operator?: boolean; headers?: Record<string, string> } = {}) =>
  t.handlers.handle(makeRequest(method, path, { user: options.user ?? 'olga', ...options }));

async function heldTurn(text: string) {
  const turn = await startTurn(t.db, { ownerId: 'rae', text });
  await t.db.query('delete from agent_kit_jobs where run_id = $1', [turn.runId]); // no segment takes it meanwhile
  expect((await send('POST', `/api/runs/${turn.runId}/takeover`, { operator: true })).status).toBe(200);
  return turn;
}

describe('POST /api/runs/:id/reply', () => {
  it("closes the held run with the operator's text, which every reader sees with the operator's name", async () => {
    const turn = await heldTurn('where is my parcel?');
    // A message sent while the run was held: its turn goes on as soon as the reply is in.
    const next = await startTurn(t.db, { ownerId: 'rae', threadId: turn.threadId, text: 'thanks!' });
    const { thread } = await (await send('GET', `/api/threads/${turn.threadId}`, { operator: true })).json() as { thread: { lastSeq: number } };
    // A viewer of the AI SDK stream, following since before the reply (its response, which names
    // the run it streams, in hand before the reply is sent).
    const viewer = await send('GET', `/api/threads/${turn.threadId}/events?after=${thread.lastSeq}&format=ai-sdk`, { user: 'rae' });
    expect(viewer.headers.get('x-agent-kit-run-id')).toBe(turn.runId);

    const response = await send('POST', `/api/runs/${turn.runId}/reply`, { operator: true, body: { text: 'It left the depot this morning.' } });
    expect(response.status).toBe(200);
    const body = await response.json() as { messageId: string };
    expect(body).toEqual({ runId: turn.runId, status: 'completed', messageId: expect.any(String), nextRunId: next.runId });

    await t.handlers.segments.settle();
    const [after] = await t.db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [next.runId]);
    expect(after!.status).toBe('completed');
    const read = await (await send('GET', `/api/threads/${turn.threadId}`, { user: 'rae' })).json() as ThreadRead & {
      runs: Array<{ id: string; status: string }>; messages: Array<{ id: string; text: string; content: Record<string, unknown> }>;
    };
    expect(read.runs.map((run) => run.status)).toEqual(['completed', 'completed']);
    const replied = read.messages.find((m) => m.id === body.messageId);
    expect(replied).toMatchObject({ text: 'It left the depot this morning.', content: { operator: 'olga' } });
    expect(toUIMessages(read).find((m) => m.role === 'assistant')).toMatchObject({
      role: 'assistant', parts: [{ type: 'text', text: 'It left the depot this morning.' }], metadata: { operator: 'olga' },
    });
    const replay = await send('GET', `/api/threads/${turn.threadId}/events?after=${thread.lastSeq}`, { user: 'rae' });
    expect((await readSse(replay, { max: 1 })).events.map(payload).filter((e) => e.runId === turn.runId)).toEqual([expect.objectContaining({
      type: 'run-closed', runId: turn.runId,
      data: expect.objectContaining({ status: 'completed', text: 'It left the depot this morning.', operator: 'olga' }),
    })]);
    const chunks = (await readSse(viewer, { max: 20 })).events
      .filter((event) => event.data !== '[DONE]').map((event) => JSON.parse(event.data) as Record<string, unknown>);
    expect(chunks.filter((chunk) => chunk.type === 'text-delta').map((chunk) => chunk.delta).join('')).toBe('It left the depot this morning.');
    expect(chunks.find((chunk) => chunk.type === 'finish')).toMatchObject({
      finishReason: 'stop', messageMetadata: { status: 'completed', operator: 'olga', messageId: body.messageId },
    });
  });

  it('refuses the thread\'s owner, another user, a run not held and a bad body, writing nothing', async () => {
    const turn = await heldTurn('hold this');
    const queued = await startTurn(t.db, { ownerId: 'rae', text: 'not held' });
    const before = await countRows(t.db);
    const status = async (runId: string, options: Parameters<typeof send>[2]) =>
      (await send('POST', `/api/runs/${runId}/reply`, options)).status;
    expect(await status(turn.runId, { user: 'rae', body: { text: 'I answer myself' } })).toBe(403);
    expect(await status(turn.runId, { user: 'mallory', body: { text: 'hi' } })).toBe(404);
    expect(await status(queued.runId, { operator: true, body: { text: 'hi' } })).toBe(409);
    for (const body of [{}, { text: '' }, { text: ' \u200b ' }, { text: 'hi', extra: 1 }, { text: 'x'.repeat(32_001) }]) {
      expect(await status(turn.runId, { operator: true, body }), JSON.stringify(body).slice(0, 40)).toBe(400);
    }
    expect(await status(turn.runId, { operator: true, raw: 'text=hi', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).toBe(415);
    expect(await status('nope', { operator: true, body: { text: 'hi' } })).toBe(400);
    expect(await countRows(t.db)).toEqual(before);
    const blank = await send('POST', `/api/runs/${turn.runId}/reply`, { operator: true, body: { text: '' } });
    expect((await blank.json() as { error: { message: string } }).error.message).toMatch(/^[^;]*must not be blank$/); // said once
    const closing = await send('POST', `/api/runs/${queued.runId}/reply`, { operator: true, body: { text: 'hi' } });
    expect((await closing.json() as { error: { message: string } }).error.message).toMatch(/is queued and not held by an operator: take it over first/);
  });
});
