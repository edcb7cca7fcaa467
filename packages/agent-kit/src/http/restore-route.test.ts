// POST /api/runs/:id/restore (ADR-0096): the thread's owner (or an operator) puts an earlier
// answer back; the thread read then has it, a viewer's replay gets one turn-restored event, and
// the same request again writes nothing. Another user gets 404; a turn under way, or a run that
// only followed a replaced reply, 409; a malformed id, 400: each writing nothing.
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

const send = (method: string, path: string, user = 'rae', body?: unknown, operator = false) =>
  t.handlers.handle(makeRequest(method, path, { user, ...(body === undefined ? {} : { body }), ...(operator ? { operator } : {}) }));

/** A thread of two turns whose second reply was regenerated: its runs and the regeneration. */
async function regeneratedThread(clientMessageId: string) {
  const first = await send('POST', '/api/chat', 'rae', { message: 'hello', clientMessageId: `${clientMessageId}-1` });
  await readSse(first);
  const threadId = first.headers.get('x-agent-kit-thread-id')!;
  const second = await send('POST', '/api/chat', 'rae', { threadId, message: 'again', clientMessageId });
  await readSse(second);
  const again = await send('POST', '/api/chat', 'rae', { threadId, message: 'again', clientMessageId, regenerate: true });
  await readSse(again);
  await t.handlers.segments.settle();
  return {
    threadId,
    runIds: [first.headers.get('x-agent-kit-run-id')!, second.headers.get('x-agent-kit-run-id')!],
    regenerated: again.headers.get('x-agent-kit-run-id')!,
  };
}

describe('POST /api/runs/:id/restore', () => {
  it('puts the earlier answer back: the read has it, the log says so once, and the same request again writes nothing', async () => {
    const { threadId, runIds, regenerated } = await regeneratedThread('h1');
    const lastSeq = (await (await send('GET', `/api/threads/${threadId}`)).json()).thread.lastSeq as number;
    expect(lastSeq).toBeGreaterThan(0);
    const response = await send('POST', `/api/runs/${runIds[1]}/restore`);
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body).toMatchObject({ threadId, runId: runIds[1], superseded: [regenerated], restored: true });

    const read = await (await send('GET', `/api/threads/${threadId}`)).json();
    expect(read.runs.map((r: { id: string; restoredOver: string | null }) => [r.id, r.restoredOver])).toEqual([[runIds[0], null], [runIds[1], regenerated]]);
    // A useChat page opened from the read: the restored reply names the answer it replaced.
    expect(toUIMessages(read as ThreadRead).at(-1)!.metadata).toMatchObject({ restoredOver: regenerated });
    expect(toUIMessages(read as ThreadRead)[1]!.metadata).not.toHaveProperty('restoredOver');
    expect(read.messages.filter((m: { role: string }) => m.role === 'user').map((m: { clientMessageId: string; runId: string }) =>
      [m.clientMessageId, m.runId])).toEqual([['h1-1', runIds[0]], ['h1', runIds[1]]]);
    const replay = await send('GET', `/api/threads/${threadId}/events?after=${lastSeq}`);
    expect((await readSse(replay, { max: 1 })).events.map(payload)).toEqual([expect.objectContaining({
      type: 'turn-restored', runId: runIds[1], data: expect.objectContaining({ replaces: regenerated, superseded: [regenerated] }),
    })]);
    const detail = await (await send('GET', `/api/runs/${regenerated}`)).json();
    expect(detail.run).toMatchObject({ supersededBy: runIds[1] });

    const before = await countRows(t.db);
    const again = await send('POST', `/api/runs/${runIds[1]}/restore`);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ ...body, superseded: [], restored: false });
    expect(await countRows(t.db)).toEqual(before);

    // An operator may restore a user's answer too.
    const back = await send('POST', `/api/runs/${regenerated}/restore`, 'ops', undefined, true);
    expect(await back.json()).toMatchObject({ runId: regenerated, superseded: [runIds[1]], restored: true });
  });

  it('refuses what it cannot do, writing nothing', async () => {
    const { threadId, runIds } = await regeneratedThread('h2');
    await startTurn(t.db, { threadId, ownerId: 'rae', text: 'queued behind' }); // turn 4 stays queued: no drain here
    const written = async () => [await countRows(t.db), (await (await send('GET', `/api/threads/${threadId}`)).json()).runs];
    const before = await written();
    const cases: Array<[string, string, number, RegExp]> = [
      [`/api/runs/${runIds[1]}/restore`, 'eve', 404, /not found/],
      [`/api/runs/${crypto.randomUUID()}/restore`, 'rae', 404, /not found/],
      ['/api/runs/run-1/restore', 'rae', 400, /id/],
      [`/api/runs/${runIds[1]}/restore`, 'rae', 409, /turn 4 .* is queued/],
    ];
    for (const [path, user, status, message] of cases) {
      const response = await send('POST', path, user);
      expect(response.status, `${user} ${path}`).toBe(status);
      expect(JSON.stringify(await response.json()), path).toMatch(message);
    }
    expect((await send('GET', `/api/runs/${runIds[1]}/restore`)).status).toBe(405);
    expect(await written()).toEqual(before);
  });
});
