// Section 4: the stream mirror. One run streaming at 2,000 tokens/s: database writes per second
// and tokens/s against consuming the same model stream raw with streamText. Then many runs
// streaming at once in this one process (100, 1,000): CPU and memory per run.
import v8 from 'node:v8';
import vm from 'node:vm';
import { streamText } from 'ai';
import { createScriptedModel } from '../src/model/index.js';
import { runSegment } from '../src/turn/index.js';
import { startTurn } from '../src/queue/start-turn.js';
import type { Db } from '../src/store/db.js';
import { seedQueuedRuns } from './lib/bench-db.js';
import { countingDb } from './lib/counting-db.js';
import type { Row } from './lib/report.js';
import { benchRuntime, clearQueue } from './orchestration.js';

export interface MirrorOptions {
  /** Tokens of the single fast stream (at 2,000 tokens/s: tokens / 2000 seconds). */
  tokens: number;
  tokensPerSecond: number;
  /** Concurrent streaming runs in one process, each at `manyTokensPerSecond` for `manyTokens`. */
  many: number[];
  manyTokens: number;
  manyTokensPerSecond: number;
}

// Statements that write (SQL functions); table names are reads (journal, history, effects).
const writeLabels = new Set([
  'agent_kit_claim_run', 'agent_kit_begin_segment', 'agent_kit_mirror_partial', 'agent_kit_renew_lease',
  'agent_kit_record_step', 'agent_kit_commit_step', 'agent_kit_record_effect', 'agent_kit_close_run', 'agent_kit_park_run',
  'agent_kit_append_event', 'agent_kit_fail_segment', 'agent_kit_consume_input', 'agent_kit_commit_steps',
  'agent_kit_close_runs',
]);

/** A full garbage collection on demand, without starting node with --expose-gc. */
function collector(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** Bytes this process holds live: the JS heap and what it keeps outside it (buffers, WASM). */
function liveBytes(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

/** Tokens/s of the raw stream: streamText over the same model and prompt, consumed to the end. */
async function rawStream(tokens: number, tokensPerSecond: number) {
  const model = createScriptedModel({ tokens, delayMs: 1000 / tokensPerSecond });
  const startAt = performance.now();
  const result = streamText({ model, messages: [{ role: 'user', content: 'stream' }], maxRetries: 0 });
  let deltas = 0;
  for await (const part of result.fullStream) if (part.type === 'text-delta') deltas++;
  return { deltas, ms: performance.now() - startAt };
}

/** One run through the turn engine at the same rate; its writes counted by label. */
async function mirroredStream(db: Db, tokens: number, tokensPerSecond: number) {
  const counted = countingDb(db);
  const rt = benchRuntime(counted, createScriptedModel({ tokens, delayMs: 1000 / tokensPerSecond }));
  const turn = await startTurn(db, { ownerId: 'bench-mirror', text: 'stream', jobDelayMs: 600_000 });
  counted.reset();
  const startAt = performance.now();
  const outcome = await runSegment(rt, { runId: turn.runId, owner: 'bench-mirror' });
  const ms = performance.now() - startAt;
  if (outcome.kind !== 'closed') throw new Error(`the streaming run ended ${outcome.kind}`);
  let writes = 0;
  for (const [label, n] of counted.counts) if (writeLabels.has(label)) writes += n;
  return { ms, writes, mirrorWrites: counted.counts.get('agent_kit_mirror_partial') ?? 0 };
}

/** `count` runs streaming at once in this process: CPU and live memory per run. */
async function manyStreams(db: Db, count: number, o: MirrorOptions) {
  await clearQueue(db);
  const ids = await seedQueuedRuns(db, count);
  await db.exec('delete from agent_kit_jobs'); // run here, not by a drain
  // The model counts the streams begun; with the segments that ended, that gives the runs in
  // flight at any moment.
  let streaming = 0;
  const scripted = createScriptedModel({ tokens: o.manyTokens, delayMs: 1000 / o.manyTokensPerSecond });
  const model: typeof scripted = Object.create(scripted);
  model.doStream = (options) => {
    streaming++;
    return scripted.doStream(options);
  };
  const rt = benchRuntime(db, model);
  // Earlier sections leave timers that release memory a moment later (in the full run this
  // once made the baseline larger than the peak): let them fire, then collect to a fixed point.
  const collect = collector();
  const gc = () => {
    collect();
    collect();
  };
  await new Promise((resolve) => setTimeout(resolve, 500));
  gc();
  const liveBefore = liveBytes();
  const rssBefore = process.memoryUsage().rss;
  let rssPeak = rssBefore;
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 50);
  const cpuBefore = process.cpuUsage();
  const startAt = performance.now();
  let finished = 0;
  const running = Promise.all(ids.map((runId, i) => runSegment(rt, { runId, owner: `bench-many-${i}` }).finally(() => finished++)));
  // What is live (after a full collection) over what was live before is held by the runs in
  // flight: begun and not yet closed. Measured whenever their number has grown by a quarter since
  // the last measurement, and kept at the most runs in flight; with many runs on one store the
  // first ones close before the last can claim, so not all of them are ever in flight together.
  let peak = { inFlight: 0, live: liveBefore };
  let done = false;
  running.then(() => (done = true), () => (done = true));
  while (!done) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const inFlight = streaming - finished;
    if (done || inFlight < Math.max(1, peak.inFlight * 1.25)) continue;
    gc();
    peak = { inFlight, live: liveBytes() };
  }
  const outcomes = await running;
  const wallMs = performance.now() - startAt;
  const cpu = process.cpuUsage(cpuBefore);
  clearInterval(sampler);
  const closed = outcomes.filter((x) => x.kind === 'closed').length;
  const kinds: Record<string, number> = {};
  for (const x of outcomes) {
    const key = x.kind === 'stopped' ? `stopped:${x.reason}` : x.kind === 'not-claimed' ? `not-claimed:${x.reason}` : x.kind;
    kinds[key] = (kinds[key] ?? 0) + 1;
  }
  return {
    closed, wallMs, kinds,
    cpuMsPerRun: (cpu.user + cpu.system) / 1000 / count,
    memoryKiBPerRun: (peak.live - liveBefore) / 1024 / Math.max(1, peak.inFlight),
    rssGrowthKiBPerRun: (rssPeak - rssBefore) / 1024 / count,
    inFlight: peak.inFlight,
  };
}

/** Run section 4 and return its rows. */
export async function benchStreamMirror(db: Db, o: MirrorOptions): Promise<Row[]> {
  await rawStream(Math.min(o.tokens, 500), o.tokensPerSecond); // warm the SDK and the JIT
  const raw = await rawStream(o.tokens, o.tokensPerSecond);
  const mirrored = await mirroredStream(db, o.tokens, o.tokensPerSecond);
  const seconds = mirrored.ms / 1000;
  const section = `4. Stream mirror (${o.tokensPerSecond.toLocaleString('en-US')} tokens/s, ${o.tokens.toLocaleString('en-US')} tokens)`;
  const rows: Row[] = [
    {
      section, metric: 'database writes per second per streaming run', unit: 'writes/s',
      agentKit: mirrored.mirrorWrites / seconds, target: { kind: 'at-most', value: 10 },
      note: `${mirrored.mirrorWrites} mirror writes (partial + heartbeat + text-delta event) in ${seconds.toFixed(2)} s`,
    },
    {
      section, metric: 'all writes per second of the run, claim to close', unit: 'writes/s',
      agentKit: mirrored.writes / seconds,
      note: `${mirrored.writes} writes: the mirror's and claim, begin, journal step, close`,
    },
    {
      section, metric: 'streamed throughput', unit: 'tokens/s', agentKit: (o.tokens * 1000) / mirrored.ms,
      baseline: (raw.deltas * 1000) / raw.ms, baselineName: 'raw streamText', target: { kind: 'ratio-at-least', value: 0.95 },
      note: 'claim to close, against consuming the same model stream without agent-kit',
    },
  ];
  for (const count of o.many) {
    const m = await manyStreams(db, count, o);
    const label = `${count.toLocaleString('en-US')} concurrent runs, ${o.manyTokens} tokens at ${o.manyTokensPerSecond}/s each`;
    const note = `${m.closed}/${count} closed in ${(m.wallMs / 1000).toFixed(1)} s (${JSON.stringify(m.kinds)})`;
    rows.push(
      { section, metric: `${label}: CPU per run`, unit: 'ms CPU', agentKit: m.cpuMsPerRun, note },
      {
        section, metric: `${label}: memory per run`, unit: 'KiB', agentKit: m.memoryKiBPerRun,
        note: `live heap + external after a full GC, over before, per run in flight, at the most in flight ` +
          `(${m.inFlight} of ${count}); ` +
          `resident set growth ${m.rssGrowthKiBPerRun.toFixed(0)} KiB per run; ${note}`,
      },
    );
  }
  return rows;
}
