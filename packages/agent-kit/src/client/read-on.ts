// How agent-kit/client reads one reply to its end across streams (ADR-0079, ADR-0083). Each
// stream agent-kit sends marks the last chunk of each thread event with the event's seq (the SSE
// `id:`); the reader passes a chunk on only once the event it belongs to came whole, so a stream
// that ends early can be read on after its last whole event with nothing shown twice: when its
// `finish` says the run goes on (the route's budget, a park), and when the connection was cut
// without one (a killed function, a proxy, a network that dropped).
import { uiMessageChunkSchema, type UIMessageChunk } from 'ai';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { closedStatuses } from './thread-read.js';
import { replacesText } from './replaced-text.js';

/** Where a reply goes on: its run and thread, and the thread's event its stream ended after. */
export interface Cut {
  runId: string;
  threadId: string;
  seq: number;
}

/** Where a stream starts, as far as its response says: its run and thread, and the cursor it read after. */
export type Origin = Partial<Cut>;

/**
 * The statuses a stream ends in while its run goes on without the user: `streaming` (the stream's
 * budget ran out), `queued` (parked for its next segment or a retry) and `waiting_takeover` (an
 * operator holds it; released, it goes on). Not `waiting_input`: that waits for the user.
 */
const goingOnStatuses: ReadonlySet<string> = new Set(['streaming', 'queued', 'waiting_takeover']);

/**
 * How long a stream may send nothing before it is taken for cut: the server sends a keep-alive
 * every 15 s by default (`keepAliveMs`).
 */
export const streamSilentMs = 35_000;

/** How often a reply whose streams keep being cut is read on before the chat shows the error. */
const readsOnAfterCuts = 4;

/** A stream that ended, or failed, before it was whole: neither `finish` nor `[DONE]` came. */
export class StreamCut extends Error {
  constructor(cause?: unknown) {
    super(`agent-kit's stream of the reply was cut${cause instanceof Error ? `: ${cause.message}` : ''}`, { cause });
    this.name = 'StreamCut';
  }
}

/** The seq of the event each chunk ended (its SSE `id:`): the chunks of an event up to it are whole. */
const seqOf = new WeakMap<UIMessageChunk, number>();
/** Each parsed stream's origin, from its response. */
const origins = new WeakMap<ReadableStream<UIMessageChunk>, Origin>();

let chunkSchema: ReturnType<typeof uiMessageChunkSchema> | undefined;

async function parseChunk(data: string): Promise<UIMessageChunk> {
  chunkSchema ??= uiMessageChunkSchema();
  const parsed = await chunkSchema.validate!(JSON.parse(data) as unknown);
  if (!parsed.success) throw parsed.error;
  return parsed.value;
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === 'AbortError';
}

/**
 * The UI message chunks of an SSE body, as the AI SDK's own transport parses them, each event's
 * last chunk tagged with its seq. A body that ends or fails before `finish` or `[DONE]` errors
 * with `StreamCut` (an abort stays an abort); after them, an error is the end.
 */
export function chunksOf(body: ReadableStream<Uint8Array>, origin: Origin = {}): ReadableStream<UIMessageChunk> {
  // A failed body ends the parser's input instead of failing it: the events it had whole still
  // come (a failed pipe would drop them), and then the failure.
  const bytes = body.getReader();
  let failure: { error: unknown } | undefined;
  const input = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      // A connection that died without a word sends nothing, not even the server's keep-alive.
      const silent = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the stream sent nothing for ${streamSilentMs / 1000} s`)), streamSilentMs);
      });
      try {
        const read = await Promise.race([bytes.read(), silent]);
        if (read.done) controller.close();
        else controller.enqueue(read.value);
      } catch (error) {
        if (isAbort(error)) return controller.error(error);
        void bytes.cancel().catch(() => {});
        failure = { error };
        controller.close();
      } finally {
        clearTimeout(timer);
      }
    },
    cancel: (reason) => bytes.cancel(reason),
  });
  const reader = input.pipeThrough(new TextDecoderStream() as unknown as TransformStream<Uint8Array, string>)
    .pipeThrough(new EventSourceParserStream()).getReader();
  let whole = false;
  const chunks = new ReadableStream<UIMessageChunk>({
    async pull(controller) {
      for (;;) {
        const read = await reader.read();
        if (read.done) return whole ? controller.close() : controller.error(new StreamCut(failure?.error));
        const { id, data } = read.value;
        if (data === '[DONE]') {
          whole = true;
          continue;
        }
        const chunk = await parseChunk(data);
        if (chunk.type === 'finish') whole = true;
        if (id !== undefined && /^\d{1,15}$/.test(id)) seqOf.set(chunk, Number(id));
        return controller.enqueue(chunk);
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
  origins.set(chunks, origin);
  return chunks;
}

/** Where the reply goes on, when `chunk` is the `finish` of a stream that ended before its run. */
function cutAt(chunk: UIMessageChunk): Cut | undefined {
  if (chunk.type !== 'finish') return undefined;
  const { runId, threadId, seq, status } = (chunk.messageMetadata ?? {}) as Partial<Cut & { status: string }>;
  if (typeof runId !== 'string' || typeof threadId !== 'string' || typeof seq !== 'number') return undefined;
  return goingOnStatuses.has(String(status)) ? { runId, threadId, seq } : undefined;
}

/** `ms`, or less when `signal` aborts (then the abort's error). */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      if (signal?.aborted) reject(signal.reason);
      else resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * `first`'s chunks (or, given where to start, the chunks read from there), then, while its run
 * goes on, the chunks of `next(cut)`: at the end of a stream whose `finish` said it ended before
 * its run (that `finish` is not passed on), and when a stream is cut before it was whole (its last
 * event's chunks that came only in part are not passed on, and the stream after its last whole
 * event is read a few times, a little later each time, before the chat shows the error). The step
 * and the text or reasoning part open when a stream ends go on in the next one, as in one stream
 * (ADR-0089): a question stays in its tool call's step, where `sendAutomaticallyWhen` looks for
 * it, and a sentence cut by a stream's end stays one part. A
 * stream that sent an error after its `finish` (the server could not read the log) ends the
 * message there: reading on at once would ask again and again.
 */
export function readOn(
  first: ReadableStream<UIMessageChunk> | Cut, next: (cut: Cut) => Promise<ReadableStream<UIMessageChunk>>,
  signal: AbortSignal | undefined,
  /** Called before a wait between two requests; what it returns is called when the chat stops during it. */
  stopBetween?: (cut: Cut) => () => void,
  /** Told the thread's event up to which the chat has been given the run's reply, as it moves on. */
  shown?: (runId: string, seq: number) => void,
): ReadableStream<UIMessageChunk> {
  let reader: ReadableStreamDefaultReader<UIMessageChunk> | undefined;
  let openedAt = Date.now(); // when the stream read now answered
  const at: Origin = first instanceof ReadableStream ? { ...origins.get(first) } : { ...first }; // where the chunks passed on stand
  if (first instanceof ReadableStream) reader = first.getReader();
  let pending: UIMessageChunk[] = []; // read, not yet whole
  type PartEnd = 'text-end' | 'reasoning-end';
  const openParts = new Map<string, PartEnd>();
  // The parts a stream left open when it ended before its run, by id: the next stream's first
  // part of the same kind goes on in it, under its id (ADR-0089); anything else ends them.
  const carried = new Map<string, PartEnd>();
  const renamed = new Map<string, string>(); // this stream's part id -> the carried part it goes on
  let failed: { error: unknown } | undefined; // told after the carried parts' ends went out
  let stepOpen = false;
  let joinStep = false; // the next stream's first step is the open one
  let cuts = 0; // fast failures since the last whole event
  let cancelled: { reason: unknown } | undefined;

  const endCarried = (controller: ReadableStreamDefaultController<UIMessageChunk>) => {
    for (const [id, type] of carried) controller.enqueue({ type, id } as UIMessageChunk);
    carried.clear();
  };
  /** Whether `chunk` opens the part that goes on in a carried one (then it is not passed on). */
  const goesOnInCarried = (controller: ReadableStreamDefaultController<UIMessageChunk>, chunk: UIMessageChunk): boolean => {
    if (carried.size === 0 || chunk.type === 'start' || chunk.type === 'message-metadata') return false;
    if (chunk.type.startsWith('data-') && (chunk as { transient?: boolean }).transient) return false; // not a part
    const end = chunk.type === 'text-start' ? 'text-end' : chunk.type === 'reasoning-start' ? 'reasoning-end' : undefined;
    // A text part that replaces the text before it (ADR-0111) is a part of its own, never the
    // carried one going on: carried on, its mark would be lost and the two texts joined.
    const replacing = chunk.type === 'text-start' && replacesText(chunk.providerMetadata);
    const [goesOn] = replacing ? [] : [...carried].filter(([, type]) => type === end);
    if (goesOn) carried.delete(goesOn[0]);
    endCarried(controller);
    if (!goesOn) return false;
    renamed.set((chunk as { id: string }).id, goesOn[0]);
    openParts.set(goesOn[0], goesOn[1]);
    return true;
  };
  const passOn = (controller: ReadableStreamDefaultController<UIMessageChunk>, chunk: UIMessageChunk) => {
    if (chunk.type === 'start-step' && joinStep) {
      joinStep = false;
      return;
    }
    if (goesOnInCarried(controller, chunk)) return;
    const goesOnIn = partIdOf(chunk) === undefined ? undefined : renamed.get(partIdOf(chunk)!);
    if (goesOnIn !== undefined) chunk = { ...chunk, id: goesOnIn } as UIMessageChunk;
    if (chunk.type === 'start') Object.assign(at, idsOf(chunk.messageMetadata));
    if (chunk.type === 'text-start') openParts.set(chunk.id, 'text-end');
    if (chunk.type === 'reasoning-start') openParts.set(chunk.id, 'reasoning-end');
    if (chunk.type === 'text-end' || chunk.type === 'reasoning-end') openParts.delete(chunk.id);
    if (chunk.type === 'start-step' || chunk.type === 'finish-step') stepOpen = chunk.type === 'start-step';
    controller.enqueue(chunk);
  };
  /**
   * Read on from `cut`: at once when a `finish` said the run goes on; after a cut (`error`), or a
   * read on that failed, again a little later each time, until the chat shows the error.
   */
  const goOn = async (cut: Cut, error?: unknown): Promise<void> => {
    joinStep = stepOpen;
    // A stop() while no request is out cancels the run all the same (ADR-0078).
    const stopped = stopBetween?.(cut);
    const stoppedBetween = (reason: unknown) => {
      stopped?.();
      return reason;
    };
    for (let first = error === undefined; ; first = false) {
      if (!first) {
        if (cancelled) throw error;
        if (signal?.aborted) throw stoppedBetween(signal.reason);
        if (++cuts > readsOnAfterCuts) throw error;
        await pause(cuts === 1 ? 0 : 250 * 2 ** (cuts - 1), signal).catch((aborted: unknown) => {
          throw stoppedBetween(aborted);
        });
      }
      try {
        reader = (await next(cut)).getReader();
        renamed.clear();
        openedAt = Date.now();
        if (cancelled) void reader.cancel(cancelled.reason).catch(() => {}); // the chat left meanwhile
        return;
      } catch (failed) {
        if (cancelled || signal?.aborted) throw failed; // (that request saw the stop)
        error = failed;
      }
    }
  };
  /** The stream's end: what it held back, then, when its `finish` says the run goes on, the rest. */
  const ended = async (controller: ReadableStreamDefaultController<UIMessageChunk>): Promise<boolean> => {
    const held = pending;
    pending = [];
    const finishAt = held.findIndex((chunk) => cutAt(chunk) !== undefined);
    const erred = held.slice(finishAt + 1).some((chunk) => chunk.type === 'error');
    const goesOn = finishAt >= 0 && !erred ? cutAt(held[finishAt]!) : undefined;
    // Going on: its `finish` is not the reply's, nor its `finish-step` the step's, nor the ends of
    // the parts open at its end the parts' (the next stream goes on in them).
    let tail = held.length;
    while (tail > 0 && endsOfStream.has(held[tail - 1]!.type)) tail--;
    for (const [i, chunk] of held.entries()) {
      if (!goesOn) passOn(controller, chunk);
      else if (i >= tail && (chunk.type === 'text-end' || chunk.type === 'reasoning-end') && openParts.has(renamed.get(chunk.id) ?? chunk.id)) {
        const id = renamed.get(chunk.id) ?? chunk.id; // (the id the chat knows the part by)
        openParts.delete(id);
        carried.set(id, chunk.type);
      } else if (i !== finishAt && chunk.type !== 'finish-step') passOn(controller, chunk);
    }
    if (!goesOn) return false;
    at.seq = goesOn.seq;
    if (at.runId !== undefined) shown?.(at.runId, at.seq);
    await goOn(goesOn);
    return true;
  };
  /** A cut: end the parts the chat shows open, and read on after the last whole event, if it is known. */
  const cutOff = async (controller: ReadableStreamDefaultController<UIMessageChunk>, error: unknown) => {
    pending = [];
    const { runId, threadId } = at;
    if (runId === undefined || threadId === undefined || cancelled) throw error;
    for (const [id, type] of openParts) carried.set(id, type);
    openParts.clear();
    // A stream that stood a while was cut by the way there (a proxy's limit), not by a failing server.
    if (Date.now() - openedAt >= 1_000) cuts = 0;
    await goOn({ runId, threadId, seq: at.seq ?? 0 }, error);
  };

  const pullOnce = async (controller: ReadableStreamDefaultController<UIMessageChunk>) => {
    for (;;) {
      let read: ReadableStreamReadResult<UIMessageChunk>;
      try {
        if (!reader) await goOn(first as Cut);
        read = await reader!.read();
      } catch (error) {
        if (!(error instanceof StreamCut)) throw error;
        await cutOff(controller, error);
        continue;
      }
      if (read.done) {
        if (await ended(controller)) continue;
        endCarried(controller);
        return controller.close();
      }
      pending.push(read.value);
      const seq = seqOf.get(read.value);
      if (seq === undefined) continue;
      for (const chunk of pending) passOn(controller, chunk);
      pending = [];
      at.seq = seq;
      if (at.runId !== undefined) shown?.(at.runId, seq);
      cuts = 0;
      return;
    }
  };

  return new ReadableStream<UIMessageChunk>({
    async pull(controller) {
      if (failed) throw failed.error;
      try {
        await pullOnce(controller);
      } catch (error) {
        if (carried.size === 0) throw error;
        // The chat shows the parts the stream left open as ended, then the error.
        endCarried(controller);
        failed = { error };
      }
    },
    cancel(reason) {
      cancelled = { reason };
      return reader?.cancel(reason);
    },
  });
}

/** The id of the text or reasoning part a delta or end belongs to. */
function partIdOf(chunk: UIMessageChunk): string | undefined {
  return /^(text|reasoning)-(delta|end)$/.test(chunk.type) ? (chunk as { id: string }).id : undefined;
}

/** The chunks a stream that ends before its run ends with, after its last event's. */
const endsOfStream: ReadonlySet<string> = new Set(['text-end', 'reasoning-end', 'finish-step', 'finish']);

function idsOf(metadata: unknown): Origin {
  const { runId, threadId } = (metadata ?? {}) as Origin;
  return {
    ...(typeof runId === 'string' ? { runId } : {}),
    ...(typeof threadId === 'string' ? { threadId } : {}),
  };
}

/**
 * `first`, a reply read to its end, then the reply of each run of `next` in turn (`open(runId)`),
 * each a message of its own, while the run before it closed (ADR-0088): a chat reopened with turns
 * queued behind the one under way shows each of them as it runs. A run that ends waiting for the
 * user ends the chain, since the turns behind it wait for the answer.
 */
export function oneAfterAnother(
  first: ReadableStream<UIMessageChunk>, next: readonly string[], open: (runId: string) => ReadableStream<UIMessageChunk>,
): ReadableStream<UIMessageChunk> {
  let reader = first.getReader();
  let status: unknown;
  const queue = [...next];
  return new ReadableStream<UIMessageChunk>({
    async pull(controller) {
      for (;;) {
        const read = await reader.read();
        if (!read.done) {
          if (read.value.type === 'finish') status = (read.value.messageMetadata as { status?: unknown } | undefined)?.status;
          return controller.enqueue(read.value);
        }
        const runId = closedStatuses.has(String(status)) ? queue.shift() : undefined;
        if (runId === undefined) return controller.close();
        status = undefined;
        reader = open(runId).getReader();
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}
