// Section 4c: a viewer in another process, such as a second tab or a reload that a serverless
// platform routes to another instance. The writer commits one text-delta every 100 ms (the stream
// mirror's cadence) by plain SQL, so no wake of this process reaches the viewer: it learns of
// events from a NOTIFY, or, behind a transaction-mode pooler where LISTEN hears nothing, from its
// poll alone. Measured: each event's lag from its commit to the viewer, and the viewer's reads of
// the log per second. The baseline is the same viewer hearing LISTEN.
import { followEvents } from '../src/event-log/follow-events.js';
import { startTurn } from '../src/queue/start-turn.js';
import { sleep } from '../src/queue/pace.js';
import type { Db } from '../src/store/db.js';
import { percentile } from './lib/measure.js';
import type { Row } from './lib/report.js';

export interface OtherViewerOptions {
  /** How long the writer streams. */
  durationMs: number;
  /** Between two committed events. */
  intervalMs: number;
}

interface Measured {
  lags: number[];
  readsPerSecond: number;
}

async function follow(db: Db, viewerDb: Db, notify: boolean, o: OtherViewerOptions): Promise<Measured> {
  let reads = 0;
  const counted: Db = {
    ...viewerDb,
    query: (sql, params) => {
      if (sql.includes('from agent_kit_thread_events')) reads++;
      return viewerDb.query(sql, params);
    },
  };
  const turn = await startTurn(db, { ownerId: 'bench-other-viewer', text: 'hello' });
  const follower = followEvents(counted, { threadId: turn.threadId, afterSeq: 2 });
  const committedAt = new Map<number, number>();
  const lags: number[] = [];
  const viewing = (async () => {
    for await (const event of follower) lags.push(performance.now() - committedAt.get(event.seq)!);
  })();
  await sleep(50); // the viewer is waiting
  const startAt = performance.now();
  for (let n = 0; performance.now() - startAt < o.durationMs; n++) {
    const [row] = await db.query<{ seq: number | string }>(
      `select agent_kit__append_event($1, $2, 1, 'text-delta', jsonb_build_object('text', $3::text)) as seq`,
      [turn.threadId, turn.runId, `t${n} `],
    );
    const seq = Number(row!.seq);
    committedAt.set(seq, performance.now());
    if (notify) await db.query(`select pg_notify('agent_kit_events', $1 || ':' || $2)`, [turn.threadId, seq]);
    await sleep(Math.max(0, startAt + (n + 1) * o.intervalMs - performance.now()));
  }
  // Until the last event arrives (at most one poll), then stop.
  for (const end = performance.now() + 5_000; lags.length < committedAt.size && performance.now() < end;) await sleep(10);
  const seconds = (performance.now() - startAt) / 1000;
  follower.close();
  await viewing;
  if (lags.length !== committedAt.size) throw new Error(`the viewer saw ${lags.length} of ${committedAt.size} events`);
  return { lags, readsPerSecond: reads / seconds };
}

/** Run section 4c and return its rows. */
export async function benchOtherViewer(db: Db, o: OtherViewerOptions): Promise<Row[]> {
  const heard = await follow(db, db, true, o);
  // Through a transaction-mode pooler LISTEN delivers nothing: a Db whose listen never hears.
  const unheard = await follow(db, { ...db, listen: async () => async () => {} }, false, o);
  const section = `4c. A viewer in another process (one event per ${o.intervalMs} ms for ${o.durationMs / 1000} s)`;
  const events = `${unheard.lags.length} events`;
  const lagRow = (p: number): Row => ({
    section, metric: `lag from commit to viewer p${p * 100}, no LISTEN (a transaction-mode pooler)`, unit: 'ms',
    agentKit: percentile(unheard.lags, p), baseline: percentile(heard.lags, p), baselineName: 'the same viewer hearing LISTEN',
    note: `${events}; the first poll (1 s on Postgres, 250 ms on PGlite) finds the stream, then the viewer polls ` +
      'every 100 ms while polls find events no notification announced (ADR-0032)',
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
