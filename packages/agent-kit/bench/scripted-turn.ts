// Section 2b: the same work. The scripted turn (no delay, a short reply, one tool call) through
// agent-kit's worker loop and turn engine, against what a user would build instead: the same
// model and tool in a graphile-worker job that streams the turn and inserts its message, with
// no lease, no fence, no journal and no event log.
import { stepCountIs, streamText, tool, type LanguageModel } from 'ai';
import { createScriptedModel, recordEffectTool } from '../src/model/index.js';
import { runSegment } from '../src/turn/index.js';
import type { Db } from '../src/store/db.js';
import { cpuSince, cpuSnapshot } from './lib/cpu.js';
import { measureDrain, type DrainResult } from './lib/drain-measure.js';
import type { Row } from './lib/report.js';
import { drainWithWorker, type WorkerDrainResult } from './orchestration.js';
import { describeCpu } from './throughput.js';
import { withGraphileWorker, type GraphileConfigName } from './peers.js';

export interface ScriptedTurnOptions {
  concurrency: number;
  jobs: number;
  timeBoxMs: number;
  /** Words in the reply: "a short reply". */
  replyTokens: number;
}

/** The user's message: `#effect` makes the scripted model call record_effect once, then reply. */
export const scriptedTurnText = 'benchmark turn #effect';

/** The turn as a user would write it with the AI SDK: stream it to the end, return the text. */
export async function plainTurn(model: LanguageModel, userText: string): Promise<string> {
  const result = streamText({
    model,
    messages: [{ role: 'user', content: userText }],
    tools: {
      record_effect: tool({
        description: recordEffectTool.description,
        inputSchema: recordEffectTool.inputSchema,
        execute: (input, { toolCallId, abortSignal }) =>
          recordEffectTool.execute!(input, { idempotencyKey: toolCallId, signal: abortSignal ?? new AbortController().signal }),
      }),
    },
    stopWhen: stepCountIs(16),
    maxRetries: 0,
  });
  let text = '';
  for await (const part of result.fullStream) {
    if (part.type === 'text-delta') text += part.text;
    if (part.type === 'error') throw part.error instanceof Error ? part.error : new Error(String(part.error));
  }
  return text;
}

/** The peer: graphile-worker jobs running plainTurn and inserting the reply (no lease). */
export async function drainPlainTurns(
  url: string, o: ScriptedTurnOptions, config: GraphileConfigName,
): Promise<DrainResult & { processCpuMsPerRun: number; restCpuMsPerRun?: number }> {
  const model = createScriptedModel({ tokens: o.replyTokens, delayMs: 0 });
  const peer = { url, concurrency: o.concurrency, jobs: o.jobs, timeBoxMs: o.timeBoxMs };
  const setup = `create table if not exists bench_plain_messages (
      id uuid primary key default gen_random_uuid(), thread_id uuid not null, role text not null,
      content jsonb not null, created_at timestamptz not null default now());
    create index if not exists bench_plain_messages__thread_id_idx on bench_plain_messages (thread_id, created_at)`;
  return withGraphileWorker(peer, config, {
    bench_turn: async (payload, helpers) => {
      const { threadId, text } = payload as { threadId: string; text: string };
      const reply = await plainTurn(model, text);
      await helpers.query(
        `insert into bench_plain_messages (thread_id, role, content) values ($1, 'assistant', $2)`,
        [threadId, JSON.stringify({ text: reply })],
      );
    },
  }, async (client) => {
    await client.query(setup);
    const cpuAtStart = cpuSnapshot();
    const result = await measureDrain({
      total: o.jobs, timeBoxMs: o.timeBoxMs,
      enqueue: async () => {
        await client.query(
          `select count(*) from graphile_worker.add_jobs(array(
             select row('bench_turn', json_build_object('threadId', gen_random_uuid(), 'text', $2::text),
               null, null, null, null, null, null)::graphile_worker.job_spec
             from generate_series(1, $1::int)))`,
          [o.jobs, scriptedTurnText],
        );
      },
      isDrained: async () => (await client.query('select not exists (select 1 from graphile_worker._private_jobs) as ok')).rows[0].ok,
      countDone: async () => o.jobs - Number((await client.query('select count(*) as n from graphile_worker._private_jobs')).rows[0].n),
    });
    const cpu = cpuSince(cpuAtStart);
    return {
      ...result, processCpuMsPerRun: cpu.processMs / result.done,
      restCpuMsPerRun: cpu.restMs === undefined ? undefined : cpu.restMs / result.done,
    };
  });
}

/** agent-kit: the same turn through the worker loop and the turn engine. */
export function drainScriptedTurns(db: Db, o: ScriptedTurnOptions): Promise<WorkerDrainResult> {
  return drainWithWorker(db, runSegment, {
    concurrency: o.concurrency, jobs: o.jobs, timeBoxMs: o.timeBoxMs, text: scriptedTurnText,
    model: createScriptedModel({ tokens: o.replyTokens, delayMs: 0 }),
  });
}

/** Run section 2b and return its rows. */
export async function benchScriptedTurn(db: Db, url: string, o: ScriptedTurnOptions): Promise<Row[]> {
  const agentKit = await drainScriptedTurns(db, o);
  const fastest = await drainPlainTurns(url, o, 'fastest');
  const defaults = await drainPlainTurns(url, o, 'defaults');
  const section = `2b. The same work: scripted turn with one tool call (concurrency ${o.concurrency}, turns/s)`;
  const rt = agentKit.roundTripsPerRun.total!;
  return [
    {
      section, metric: 'vs graphile-worker job, fastest config', unit: 'turns/s', agentKit: agentKit.perSecond,
      baseline: fastest.perSecond, baselineName: 'gw fastest, no lease', target: { kind: 'ratio-at-least', value: 1.0 },
      note: `agent-kit ${rt.toFixed(1)} round trips/turn (batch claims with the begin, step commits, one of them starting the effect, ` +
        `notifications; commits of several turns share a statement when they pile up)` +
        `${agentKit.commitsPerRun === undefined ? '' : `, ${agentKit.commitsPerRun.toFixed(2)} commits/turn`}; ${describeCpu(agentKit)}; ` +
        `gw fastest ${describeCpu(fastest)}`,
    },
    {
      section, metric: 'vs graphile-worker job, defaults', unit: 'turns/s', agentKit: agentKit.perSecond,
      baseline: defaults.perSecond, baselineName: 'gw defaults, no lease',
    },
  ];
}
