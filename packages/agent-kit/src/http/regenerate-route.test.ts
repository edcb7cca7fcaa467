// POST /api/chat with `regenerate: true` (ADR-0091): it streams the new run from the event that
// replaced the old turn to its close, names the run in its headers, and refuses a body that
// cannot say what to regenerate (400), a message it cannot find (404) and a turn under way (409),
// writing nothing; with another text it edits the message. Naming the reply it replaces
// (`replaces`, ADR-0092), the same request again streams the run the first one made.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, makeRequest, openHttpTest, payload, readSse, type HttpTest } from '../../test/harness/http-harness.js';
import { startTurn } from '../queue/start-turn.js';

let t: HttpTest;
beforeAll(async () => {
  t = await openHttpTest();
});
afterAll(async () => {
  await t.close();
});

const chat = (body: unknown, user = 'rae') => t.handlers.handle(makeRequest('POST', '/api/chat', { user, body }));

async function answeredThread(clientMessageId: string) {
  const response = await chat({ message: 'hello', clientMessageId });
  await readSse(response);
  await t.handlers.segments.settle();
  return { threadId: response.headers.get('x-agent-kit-thread-id')!, runId: response.headers.get('x-agent-kit-run-id')! };
}

describe('POST /api/chat, regenerate: true', () => {
  it('streams the new run from the turn-regenerated event to its close', async () => {
    const { threadId, runId } = await answeredThread('g1');
    const response = await chat({ threadId, clientMessageId: 'g1', message: 'hello', regenerate: true });
    expect(response.status).toBe(200);
    const newRun = response.headers.get('x-agent-kit-run-id')!;
    expect(newRun).not.toBe(runId);
    expect(response.headers.get('x-agent-kit-thread-id')).toBe(threadId);
    const events = (await readSse(response)).events.map(payload);
    expect(events[0]).toMatchObject({ type: 'turn-regenerated', runId: newRun, data: { regenerates: runId, superseded: [runId] } });
    expect(events.at(-1)).toMatchObject({ type: 'run-closed', runId: newRun, data: { status: 'completed' } });
    expect(events.every((e) => e.runId === newRun)).toBe(true);
    await t.handlers.segments.settle();
    const read = await (await t.handlers.handle(makeRequest('GET', `/api/threads/${threadId}`, { user: 'rae' }))).json();
    expect(read.runs.map((r: { id: string }) => r.id)).toEqual([newRun]);
    expect(read.runs[0].regenerates).toEqual({ runId, edited: false });
    const page = await (await t.handlers.handle(makeRequest('GET', `/api/threads/${threadId}?turns=5`, { user: 'rae' }))).json();
    expect(page.runs.map((r: { regenerates: unknown }) => r.regenerates)).toEqual([{ runId, edited: false }]);
    expect(read.messages.map((m: { role: string; runId: string }) => [m.role, m.runId])).toEqual([['user', newRun], ['assistant', newRun]]);
    // The operator's run view still has the old run, saying what replaced it.
    const old = await (await t.handlers.handle(makeRequest('GET', `/api/runs/${runId}`, { user: 'rae' }))).json();
    expect(old.run).toMatchObject({ status: 'completed', supersededBy: newRun });
    expect(old.regenerates).toBeNull();
    const detail = await (await t.handlers.handle(makeRequest('GET', `/api/runs/${newRun}`, { user: 'rae' }))).json();
    expect(detail.regenerates).toEqual({ runId, edited: false });
  });

  it('with another text, edits the message: the new run answers the edit, under the same client id', async () => {
    const { threadId, runId } = await answeredThread('g9');
    const response = await chat({ threadId, clientMessageId: 'g9', message: 'hello again, edited', regenerate: true });
    expect(response.status).toBe(200);
    const events = (await readSse(response)).events.map(payload);
    expect(events[0]).toMatchObject({ type: 'turn-regenerated', data: { superseded: [runId], text: 'hello again, edited', edited: true } });
    await t.handlers.segments.settle();
    const read = await (await t.handlers.handle(makeRequest('GET', `/api/threads/${threadId}`, { user: 'rae' }))).json();
    expect(read.messages.map((m: { role: string; text: string; clientMessageId: string | null }) => [m.role, m.role === 'user' ? `${m.clientMessageId}: ${m.text}` : m.text]))
      .toEqual([['user', 'g9: hello again, edited'], ['assistant', 'Hello, world.']]);
  });

  it('refuses what it cannot do, writing nothing', async () => {
    const { threadId } = await answeredThread('g2');
    await startTurn(t.db, { threadId, ownerId: 'rae', text: 'queued behind', clientMessageId: 'g3' }); // stays queued: no drain here
    const before = await countRows(t.db);
    const cases: Array<[unknown, number, RegExp, string?]> = [
      [{ threadId, message: 'hello' , regenerate: true }, 400, /clientMessageId: is required to regenerate/],
      [{ clientMessageId: 'g2', regenerate: true }, 400, /threadId: is required to regenerate/],
      [{ threadId, clientMessageId: 'g2' }, 400, /message: is required/],
      [{ threadId, clientMessageId: 'g2', regenerate: 'yes' }, 400, /regenerate/],
      [{ threadId, clientMessageId: 'nope', regenerate: true }, 404, /not found/],
      [{ threadId, clientMessageId: 'g2', regenerate: true }, 404, /not found/, 'eve'],
      [{ threadId: crypto.randomUUID(), clientMessageId: 'g2', regenerate: true }, 404, /not found/],
      [{ threadId, clientMessageId: 'g2', regenerate: true }, 409, /turn 2 .* is queued/],
      [{ threadId, clientMessageId: 'g3', regenerate: true }, 409, /is queued/],
      [{ threadId, clientMessageId: 'g2', message: ' ', regenerate: true }, 400, /message: must not be blank/],
      [{ threadId, clientMessageId: 'g2', message: 'hello', replaces: crypto.randomUUID() }, 400, /replaces: goes with regenerate: true/],
      [{ threadId, clientMessageId: 'g2', regenerate: true, replaces: 'run-1' }, 400, /replaces/],
      [{ threadId, clientMessageId: 'g2', regenerate: true, replaces: crypto.randomUUID() }, 404, /run .* not found in thread/],
    ];
    for (const [body, status, message, user] of cases) {
      const response = await chat(body, user);
      expect(response.status, JSON.stringify(body)).toBe(status);
      expect(JSON.stringify(await response.json()), JSON.stringify(body)).toMatch(message);
    }
    expect(await countRows(t.db)).toEqual(before);
  });

  it('with replaces, the same request again streams the run the first one made, to its end', async () => {
    const { threadId, runId } = await answeredThread('g5');
    const body = { threadId, clientMessageId: 'g5', message: 'hello', regenerate: true, replaces: runId };
    const first = await chat(body);
    const newRun = first.headers.get('x-agent-kit-run-id')!;
    const firstEvents = (await readSse(first)).events.map(payload);
    await t.handlers.segments.settle();
    const before = await countRows(t.db);

    const again = await chat(body); // its response was lost, say: the page sends it again
    expect(again.status).toBe(200);
    expect(again.headers.get('x-agent-kit-run-id')).toBe(newRun);
    expect((await readSse(again)).events.map(payload)).toEqual(firstEvents);
    expect(await countRows(t.db)).toEqual(before);
    // Once the reply was asked again from the new run, the old request is a conflict.
    await readSse(await chat({ ...body, replaces: newRun }));
    await t.handlers.segments.settle();
    const late = await chat(body);
    expect(late.status).toBe(409);
    expect(JSON.stringify(await late.json())).toMatch(/no longer run/);
  });
});
