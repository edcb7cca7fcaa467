// Section 4c: a viewer in another process, such as a second tab or a reload that a serverless
// platform routes to another instance. The writer commits one text-delta every 100 ms (the stream
// mirror's cadence) by plain SQL, so no wake of this process reaches the viewer: it learns of
// events from a NOTIFY, or, behind a transaction-mode pooler where LISTEN hears nothing, from its
// poll alone. The viewer joins one second into the stream and replays the thread from its start,
// as a reloaded page does. Measured: the lag of each event committed after it joined, from its
// commit to the viewer, and the viewer's reads of the log per second. The baseline is the same
// viewer hearing LISTEN.
import { followEvents } from '../src/event-log/follow-events.js';
import { startTurn } from '../src/queue/start-turn.js';
import { sleep } from '../src/queue/pace.js';
import type { Db } from '../src/store/db.js';
import { withoutListen } from './lib/bench-db.js';
import { countingDb } from './lib/counting-db.js';
import { percentile } from './lib/measure.js';
import type { Row } from './lib/report.js';

export interface OtherViewerOptions {
  /** How long the writer streams. */
  durationMs: number;
  /** Between two committed events. */
  intervalMs: number;
  /** When the viewer joins, after the stream started. */
  joinAfterMs: number;
}

interface Measured {
  lags: number[];
  readsPerSecond: number;
}

async function follow(db: Db, viewerDb: Db, notify: boolean, o: OtherViewerOptions): Promise<Measured> {
  const counted = countingDb(viewerDb); // the follower's statements are its reads of the log
  const turn = await startTurn(db, { ownerId: 'bench-other-viewer', text: 'hello' });
  const committedAt = new Map<number, number>();
  // Kept by seq, not matched on arrival: a viewer woken by the commit's own NOTIFY can read an
  // event before the writer's process has handled the reply to its append (and noted the time).
  const receivedAt = new Map<number, number>();
  let viewing: Promise<void> | undefined;
  let follower: ReturnType<typeof followEvents> | undefined;
  let joinedAt = Infinity;
  const join = () => {
    joinedAt = performance.now();
    follower = followEvents(counted, { threadId: turn.threadId });
    viewing = (async () => {
      for await (const event of follower!) receivedAt.set(event.seq, performance.now());
    })();
  };
  const startAt = performance.now();
  for (let n = 0; performance.now() - startAt < o.durationMs; n++) {
    if (!follower && performance.now() - startAt >= o.joinAfterMs) join();
    const [row] = await db.query<{ seq: number | string }>(
      `select agent_kit__append_event($1, $2, 1, 'text-delta', jsonb_build_object('text', $3::text)) as seq`,
      [turn.threadId, turn.runId, `t${n} `],
    );
    const seq = Number(row!.seq);
    committedAt.set(seq, performance.now());
    if (notify) await db.query(`select pg_notify('agent_kit_events', $1 || ':' || $2)`, [turn.threadId, seq]);
    await sleep(Math.max(0, startAt + (n + 1) * o.intervalMs - performance.now()));
  }
  if (!follower) throw new Error('the stream ended before the viewer joined');
  const expected = [...committedAt].filter(([, at]) => at > joinedAt).map(([seq]) => seq);
  const seen = () => expected.filter((seq) => receivedAt.has(seq)).length;
  // Until the last event arrives (at most one poll), then stop.
  for (const end = performance.now() + 5_000; seen() < expected.length && performance.now() < end;) await sleep(10);
  const seconds = (performance.now() - joinedAt) / 1000;
  follower.close();
  await viewing;
  if (seen() !== expected.length) throw new Error(`the viewer saw ${seen()} of ${expected.length} events`);
  // A read that beat the writer's own bookkeeping counts as no lag.
  const lags = expected.map((seq) => Math.max(0, receivedAt.get(seq)! - committedAt.get(seq)!));
  return { lags, readsPerSecond: counted.total() / seconds };
}

/** Run section 4c and return its rows. */
export async function benchOtherViewer(db: Db, o: OtherViewerOptions): Promise<Row[]> {
  const heard = await follow(db, db, true, o);
  const unheard = await follow(db, withoutListen(db), false, o);
  const section = `4c. A viewer in another process, joining ${o.joinAfterMs / 1000} s into a stream (one event per ${o.intervalMs} ms for ${o.durationMs / 1000} s)`;
  const events = `${unheard.lags.length} events after it joined`;
  const lagRow = (p: number): Row => ({
    section, metric: `lag from commit to viewer p${p * 100}, no LISTEN (a transaction-mode pooler)`, unit: 'ms',
    agentKit: percentile(unheard.lags, p), baseline: percentile(heard.lags, p), baselineName: 'the same viewer hearing LISTEN',
    note: `${events}; joining a thread written moments ago, or once a poll finds events no notification ` +
      'announced, the viewer polls every 100 ms while its polls find events (ADR-0032)',
  });
  return [
    lagRow(0.5), lagRow(0.99),
    {
      section, metric: 'log reads per second, no LISTEN', unit: 'reads/s', agentKit: unheard.readsPerSecond,
      baseline: heard.readsPerSecond, baselineName: 'the same viewer hearing LISTEN (one read per wake)',
      note: `${events}; the reads this viewer's process makes for the thread, shared by all its viewers at one cursor`,
    },
  ];
}
