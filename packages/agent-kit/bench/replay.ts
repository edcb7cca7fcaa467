// Section 5: replaying a long thread. A thread with N events (a streamed turn's text deltas) is
// replayed over SSE from GET /api/threads/:id/events through the library's own HTTP handler on a
// loopback node:http server; the baseline is the raw read path (pages of readEvents).
import { readEvents, maxEventPageSize } from '../src/event-log/index.js';
import type { Db } from '../src/store/db.js';
import type { Row } from './lib/report.js';
import { withServer } from './lib/http-server.js';

export interface ReplayOptions {
  events: number;
  /** Replays measured (best kept: the first one warms caches and the JIT). */
  repeats: number;
}

/** A new thread with one run and `count` text-delta events (one statement per 5,000). */
export async function seedLongThread(db: Db, count: number): Promise<string> {
  const [turn] = await db.query<{ thread_id: string; run_id: string }>(
    `select thread_id, run_id from agent_kit_start_turn(null, 'bench-replay', 'a long turn')`,
  );
  for (let done = 2; done < count; done += 5_000) {
    await db.query(
      `select count(agent_kit__append_event($1, $2, 1, 'text-delta', jsonb_build_object('text', 'token ' || g || ' ')))
       from generate_series(1, $3::int) g`,
      [turn!.thread_id, turn!.run_id, Math.min(5_000, count - done)],
    );
  }
  return turn!.thread_id;
}

/** Read the whole log page by page (the raw read path under the SSE handler). */
async function replayRaw(db: Db, threadId: string, total: number) {
  const startAt = performance.now();
  let after = 0;
  let firstMs = Number.NaN;
  while (after < total) {
    const page = await readEvents(db, { threadId, afterSeq: after, limit: maxEventPageSize });
    if (page.length === 0) break;
    if (Number.isNaN(firstMs)) firstMs = performance.now() - startAt;
    after = page[page.length - 1]!.seq;
  }
  return { firstMs, totalMs: performance.now() - startAt, events: after };
}

/** GET the SSE stream until `total` events arrived; time to the first and to the last. */
async function replaySse(baseUrl: string, threadId: string, total: number) {
  const controller = new AbortController();
  const startAt = performance.now();
  const response = await fetch(`${baseUrl}/api/threads/${threadId}/events?after=0`, { signal: controller.signal });
  if (!response.ok || !response.body) throw new Error(`SSE replay answered ${response.status}`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let firstMs = Number.NaN;
  let events = 0;
  let buffer = '';
  while (events < total) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += value;
    const frames = buffer.split('\n\n');
    buffer = frames.pop()!;
    for (const frame of frames) {
      if (!/^id:/m.test(frame)) continue; // comments and retry hints carry no event
      events++;
      if (events === 1) firstMs = performance.now() - startAt;
    }
  }
  const totalMs = performance.now() - startAt;
  controller.abort();
  await reader.cancel().catch(() => {});
  return { firstMs, totalMs, events };
}

/** Run section 5 and return its rows. */
export async function benchReplay(db: Db, o: ReplayOptions): Promise<Row[]> {
  const threadId = await seedLongThread(db, o.events);
  const best = <T extends { totalMs: number }>(runs: T[]) => runs.reduce((a, b) => (b.totalMs < a.totalMs ? b : a));
  const raw: Awaited<ReturnType<typeof replayRaw>>[] = [];
  const sse: Awaited<ReturnType<typeof replaySse>>[] = [];
  await withServer(db, 'bench-replay', async (baseUrl) => {
    for (let i = 0; i < o.repeats; i++) {
      raw.push(await replayRaw(db, threadId, o.events));
      sse.push(await replaySse(baseUrl, threadId, o.events));
    }
  });
  const r = best(raw);
  const s = best(sse);
  if (s.events < o.events) throw new Error(`SSE replay ended after ${s.events} of ${o.events} events`);
  const section = `5. Replay of a ${o.events.toLocaleString('en-US')}-event thread`;
  return [
    {
      section, metric: 'SSE replay', unit: 'events/s', agentKit: (s.events * 1000) / s.totalMs,
      baseline: (r.events * 1000) / r.totalMs, baselineName: 'raw page reads',
      target: { kind: 'at-least', value: 50_000 },
      note: `GET /api/threads/:id/events on node:http, best of ${o.repeats}; ${s.totalMs.toFixed(0)} ms in all`,
    },
    {
      section, metric: 'SSE time to first event', unit: 'ms', agentKit: s.firstMs,
      baseline: r.firstMs, baselineName: 'first raw page',
    },
  ];
}
