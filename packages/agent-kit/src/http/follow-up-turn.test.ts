// A message sent while its thread's turn runs in this process is queued behind it; when that turn
// closes, the same process runs the follow-up (serverless: under the same waitUntil, within the
// invocation's budget), instead of leaving it to the next cron drain. Both stores.
import { afterEach, expect, it } from 'vitest';
import { gate } from '../../test/harness/turn-kit.js';
import { makeRequest, openHttpTest, payload, readSse, type HttpTest } from '../../test/harness/http-harness.js';
import { takeMarginMs } from '../queue/drain-queue.js';

let t: HttpTest | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

/** A first turn held at `hold`, then a follow-up in the same thread that finds it running. */
async function followUpBehindFirst(hold: ReturnType<typeof gate>) {
  const chat = (body: Record<string, unknown>) => t!.handlers.handle(makeRequest('POST', '/api/chat', { user: 'alice', body }));
  const first = await chat({ message: 'first' });
  const threadId = first.headers.get('x-agent-kit-thread-id')!;
  const second = await chat({ message: 'follow-up', threadId });
  const run2 = second.headers.get('x-agent-kit-run-id')!;
  // The follow-up's own segment tries its run once and finds it blocked behind the first.
  while (t!.handlers.segments.active().includes(run2)) await new Promise((r) => setTimeout(r, 5));
  expect(t!.runner.calls.filter((id) => id === run2)).toHaveLength(1);
  hold.open();
  return { first, second, run2 };
}

async function statusOf(runId: string) {
  const [row] = await t!.db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
  return row!.status;
}

it('runs the follow-up here when the turn before it closes, and its stream shows the reply', async () => {
  const hold = gate();
  const kept: Promise<unknown>[] = [];
  t = await openHttpTest({ segment: { deltas: ['one ', 'two'], gate: hold.wait() }, deps: { waitUntil: (p) => kept.push(p) } });
  const { first, second, run2 } = await followUpBehindFirst(hold);
  expect(payload((await readSse(first)).events.at(-1)!).type).toBe('run-closed');
  const read = await readSse(second);
  expect(read.ended).toBe(true);
  expect(payload(read.events.at(-1)!)).toMatchObject({ type: 'run-closed', runId: run2, data: { status: 'completed', text: 'one two' } });
  await t.handlers.segments.settle();
  expect(await statusOf(run2)).toBe('completed');
  // Every segment, the chained one included, was handed to the platform's waitUntil.
  expect(kept).toHaveLength(3);
});

it('leaves the follow-up to a drain when too little of the invocation is left', async () => {
  const hold = gate();
  // A 2 s budget: its take margin (1 s) is already spent when the first turn closes after 1.2 s.
  t = await openHttpTest({ segment: { deltas: ['late'], gate: hold.wait() } });
  t.rt.config = { ...t.rt.config, invocationBudgetMs: 2_000, leaseTtlMs: 2_000 };
  expect(takeMarginMs(2_000)).toBe(1_000);
  const chat = (body: Record<string, unknown>) => t!.handlers.handle(makeRequest('POST', '/api/chat', { user: 'alice', body }));
  const first = await chat({ message: 'first' });
  const second = await chat({ message: 'follow-up', threadId: first.headers.get('x-agent-kit-thread-id')! });
  const run2 = second.headers.get('x-agent-kit-run-id')!;
  await new Promise((r) => setTimeout(r, 1_200));
  hold.open();
  await readSse(first);
  await t.handlers.segments.settle();
  expect(t.runner.calls.filter((id) => id === run2)).toHaveLength(1);
  expect(await statusOf(run2)).toBe('queued');
  await second.body?.cancel();
});
