// Section 4b: what agent-kit adds to the first token a person sees. A chat turn is POSTed to
// /api/chat (the library's handler on a loopback server) and timed to its first text-delta event
// on the SSE response: the message stored, the run claimed, the model called, the text mirrored,
// committed and read back from the event log. The baseline is the same model called with
// streamText, timed to its first text delta. The model waits before its first token as a hosted
// model does (a network round trip, a queue, the prompt's prefill), then streams a short reply.
import { streamText, type LanguageModel } from 'ai';
import { createParser } from 'eventsource-parser';
import { createScriptedModel } from '../src/model/index.js';
import { sleep } from '../src/queue/pace.js';
import type { Db } from '../src/store/db.js';
import { withoutListen } from './lib/bench-db.js';
import { withServer } from './lib/http-server.js';
import { percentile } from './lib/measure.js';
import type { Row } from './lib/report.js';

export interface FirstTokenOptions {
  /** Chat turns measured, each next to one raw model call (alternating). */
  requests: number;
  /** Turns and raw calls first, not measured. */
  warmups: number;
  /** How long the model waits before it streams (its time to first token). */
  modelFirstTokenMs: number;
  /** The same for a fast model (a small or local one, a cached prompt), measured with LISTEN. */
  fastModelFirstTokenMs: number;
  /** Tokens in each reply, 20 ms apart. */
  replyTokens: number;
}

/** The scripted model, starting its stream only after `firstTokenMs`. */
function slowStartModel(firstTokenMs: number, replyTokens: number): LanguageModel {
  const scripted = createScriptedModel({ tokens: replyTokens, delayMs: 20 });
  const model: typeof scripted = Object.create(scripted);
  model.doStream = async (options) => {
    await sleep(firstTokenMs, options.abortSignal); // an abort ends it early; doStream then throws
    return scripted.doStream(options);
  };
  return model;
}

/** Milliseconds from calling the model to its first text delta (the rest is not read). */
async function rawFirstToken(model: LanguageModel): Promise<number> {
  const stop = new AbortController();
  const startAt = performance.now();
  const result = streamText({ model, messages: [{ role: 'user', content: 'hello' }], maxRetries: 0, abortSignal: stop.signal });
  try {
    for await (const part of result.fullStream) {
      if (part.type === 'text-delta') return performance.now() - startAt;
    }
    throw new Error('the raw model stream ended without text');
  } finally {
    stop.abort();
  }
}

/**
 * POST a new turn and read its SSE response until the run closes: milliseconds to the first
 * text-delta event. Reading to the close keeps the turns from overlapping.
 */
async function chatFirstToken(baseUrl: string): Promise<number> {
  const startAt = performance.now();
  const response = await fetch(`${baseUrl}/api/chat`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hello' }),
  });
  if (!response.ok || !response.body) throw new Error(`POST /api/chat answered ${response.status}`);
  let firstMs = Number.NaN;
  let closed = false;
  const parser = createParser({
    onEvent(message) {
      if (message.event === 'text-delta' && Number.isNaN(firstMs)) firstMs = performance.now() - startAt;
      if (message.event === 'run-closed' || message.event === 'run-parked') closed = true;
    },
  });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    while (!closed) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(value);
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  if (Number.isNaN(firstMs)) throw new Error('the chat stream ended without a text-delta event');
  return firstMs;
}

interface Measured {
  raw: number[];
  chat: number[];
  /** Connections the server accepted into the database during the measured turns (Postgres 14+). */
  sessions?: number;
}

/** Sessions started in the current database so far, or undefined where that is not counted. */
async function sessionsSoFar(db: Db): Promise<number | undefined> {
  if (db.kind !== 'pg') return undefined;
  try {
    const [row] = await db.query<{ sessions: number | string }>(
      'select sessions from pg_stat_database where datname = current_database()',
    );
    return row ? Number(row.sessions) : undefined;
  } catch {
    return undefined; // before Postgres 14
  }
}

/** Warm up, then `requests` chat turns, each after one raw model call. */
async function measure(db: Db, model: LanguageModel, o: FirstTokenOptions): Promise<Measured> {
  const raw: number[] = [];
  const chat: number[] = [];
  let sessions: number | undefined;
  await withServer(db, 'bench-first-token', async (baseUrl) => {
    for (let i = 0; i < o.warmups; i++) { // the SDK, the handler, the JIT, the statements' plans
      await rawFirstToken(model);
      await chatFirstToken(baseUrl);
    }
    const before = await sessionsSoFar(db);
    for (let i = 0; i < o.requests; i++) {
      raw.push(await rawFirstToken(model));
      chat.push(await chatFirstToken(baseUrl));
    }
    const after = await sessionsSoFar(db);
    if (before !== undefined && after !== undefined) sessions = after - before;
  }, model);
  return { raw, chat, sessions };
}

/** Run section 4b and return its rows. */
export async function benchFirstToken(db: Db, o: FirstTokenOptions): Promise<Row[]> {
  const model = slowStartModel(o.modelFirstTokenMs, o.replyTokens);
  const listening = await measure(db, model, o);
  const deaf = await measure(withoutListen(db), model, o);
  const fast = await measure(db, slowStartModel(o.fastModelFirstTokenMs, o.replyTokens), o);
  const section = `4b. First token through POST /api/chat (model's first token after ${o.modelFirstTokenMs} ms)`;
  const row = (m: Measured, name: string, p: number, how: string): Row => {
    const agentKit = percentile(m.chat, p);
    const baseline = percentile(m.raw, p);
    return {
      section, metric: `time to first token, ${name}${how}`, unit: 'ms', agentKit, baseline,
      baselineName: `raw streamText ${name}`,
      note: `${(agentKit - baseline).toFixed(1)} ms added: message stored, run claimed, text mirrored and read back ` +
        `from the event log; ${o.requests} turns, alternating with the raw calls`,
    };
  };
  const noListen = ', no LISTEN (a transaction-mode pooler)';
  const rows = [
    row(listening, 'p50', 0.5, ''), row(listening, 'p99', 0.99, ''),
    row(deaf, 'p50', 0.5, noListen), row(deaf, 'p99', 0.99, noListen),
    row(fast, 'p50', 0.5, `, a fast model (first token after ${o.fastModelFirstTokenMs} ms)`),
    row(fast, 'p99', 0.99, `, a fast model (first token after ${o.fastModelFirstTokenMs} ms)`),
  ];
  if (listening.sessions !== undefined) {
    rows.push({
      section, metric: 'connections opened per chat turn', unit: 'connections',
      agentKit: listening.sessions / o.requests,
      note: `${listening.sessions} sessions started in the database over ${o.requests} chat turns one after ` +
        'another (pg_stat_database): the LISTEN connection outlives a chat by its linger (ADR-0033); ' +
        'a new Postgres backend costs ~4.5 ms of server CPU here',
    });
  }
  return rows;
}
