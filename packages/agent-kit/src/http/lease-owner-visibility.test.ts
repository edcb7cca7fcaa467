// The lease owner (a host name, a process id) is an operator's to see (ADR-0107): the read
// routes give a thread's own viewer each run and segment with `owner: null`, and an operator the
// name. (The streams' `segment-started` events: stream-handlers.test.ts.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRequest, openHttpTest, readSse, type HttpTest } from '../../test/harness/http-harness.js';
import { claimRun } from '../lease/lease.js';
import { startTurn } from '../queue/start-turn.js';

let t: HttpTest;
beforeAll(async () => {
  t = await openHttpTest({ segment: { deltas: ['kept ', 'short.'], delayMs: 1 } });
});
afterAll(async () => {
  await t.close();
});

async function getJson(path: string, who: { user: string; operator?: boolean }) {
  const response = await t.handlers.handle(makeRequest('GET', path, who));
  expect(response.status, path).toBe(200);
  return response.json() as Promise<Record<string, unknown>>;
}

describe('the lease owner in the read routes', () => {
  it('is null for the thread\'s own viewer and named for an operator, in every route that lists runs', async () => {
    // A finished turn (its segments name their owners) and a second one held now by a lease.
    const response = await t.handlers.handle(makeRequest('POST', '/api/chat', { user: 'alice', body: { message: 'whose process?' } }));
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    const runId = response.headers.get('x-agent-kit-run-id')!;
    await readSse(response);
    await t.handlers.segments.settle();
    const held = await startTurn(t.db, { ownerId: 'alice', threadId, text: 'and now?' });
    expect((await claimRun(t.db, { runId: held.runId, owner: 'db-host-7-pid-4242', leaseTtlMs: 3_600_000 })).claimed).toBe(true);

    const heldRunId = held.runId;
    const owners = (runs: unknown) => (runs as { owner: string | null }[]).map((run) => run.owner);
    const seenBy = async (who: { user: string; operator?: boolean }) => {
      const thread = await getJson(`/api/threads/${threadId}`, who);
      const page = await getJson(`/api/threads/${threadId}?turns=5`, who);
      const list = await getJson(`/api/runs?thread=${threadId}`, who);
      const holding = await getJson(`/api/runs/${heldRunId}`, who) as { run: { owner: string | null } };
      const done = await getJson(`/api/runs/${runId}`, who) as { segments: { owner: string | null }[] };
      expect(done.segments.length).toBeGreaterThan(0);
      return { runs: [...owners(thread.runs), ...owners(page.runs), ...owners(list.runs), holding.run.owner], segments: owners(done.segments) };
    };
    const operator = await seenBy({ user: 'op', operator: true });
    expect(operator.runs.filter((owner) => owner === 'db-host-7-pid-4242')).toHaveLength(4);
    expect(operator.segments.every((owner) => typeof owner === 'string' && owner.length > 0)).toBe(true);
    const viewer = await seenBy({ user: 'alice' });
    expect(viewer.runs).toHaveLength(operator.runs.length);
    expect([...viewer.runs, ...viewer.segments].every((owner) => owner === null)).toBe(true);
  });
});
