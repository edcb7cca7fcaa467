// The load test's viewers, in a process of their own so the server's memory is measured alone:
// each viewer opens GET /api/threads/:id/events over loopback with fetch, parses the SSE with
// eventsource-parser, and keeps only what checking needs (the next expected seq, a count, a
// running hash): it stops at its run's run-closed, at the deadline, or on an error.
import crypto from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { createParser } from 'eventsource-parser';

export interface ViewerSpec {
  threadId: string;
  runId: string;
  user: string;
  /** Connect at once (before the runs start) or this long after the parent says "go". */
  afterGo: boolean;
  delayMs: number;
}

export interface ViewerResult {
  threadId: string;
  count: number;
  lastSeq: number;
  /** sha256 over `seq|type|data` of every event, in order, as the server log gives them. */
  hash: string;
  outcome: 'closed' | 'deadline' | 'error' | 'ended-early';
  problems: string[];
}

export type ParentMessage =
  | { type: 'start'; origin: string; viewers: ViewerSpec[]; deadlineMs: number }
  | { type: 'go' };
export type ChildMessage =
  | { type: 'ready'; connected: number }
  | { type: 'done'; results: ViewerResult[]; heapUsed: number; rss: number };

const maxProblems = 5; // per viewer: enough to diagnose, bounded in memory

/** At most this many viewers between "connect" and "headers received", like a crowd arriving. */
const connectingMax = 64;
let connecting = 0;
const waitingToConnect: (() => void)[] = [];

async function connectSlot(): Promise<() => void> {
  while (connecting >= connectingMax) await new Promise<void>((resolve) => waitingToConnect.push(resolve));
  connecting++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    connecting--;
    waitingToConnect.shift()?.();
  };
}

async function watch(
  origin: string, spec: ViewerSpec, signal: AbortSignal, onHeaders: () => void,
): Promise<ViewerResult> {
  const result: ViewerResult = {
    threadId: spec.threadId, count: 0, lastSeq: 0, hash: '', outcome: 'ended-early', problems: [],
  };
  const hash = crypto.createHash('sha256');
  const problem = (text: string) => {
    if (result.problems.length < maxProblems) result.problems.push(text);
  };
  let closed = false;
  const parser = createParser({
    onEvent(event) {
      const seq = Number(event.id);
      if (seq !== result.lastSeq + 1) problem(`seq ${event.id} after ${result.lastSeq}`);
      result.lastSeq = Math.max(result.lastSeq, Number.isFinite(seq) ? seq : 0);
      result.count++;
      hash.update(`${event.id}|${event.event}|${event.data}\n`);
      if (event.event === 'run-closed' && (JSON.parse(event.data) as { runId?: string }).runId === spec.runId) {
        closed = true;
      }
    },
  });
  // "Connected" once per viewer, with its headers or its failure: "ready" never waits forever.
  let settled = false;
  const settle = () => {
    if (!settled) onHeaders();
    settled = true;
  };
  const release = await connectSlot();
  try {
    const response = await fetch(`${origin}/api/threads/${spec.threadId}/events`, {
      headers: { 'x-user': spec.user }, signal,
    }).finally(release);
    settle();
    if (response.status !== 200) {
      problem(`status ${response.status}`);
      result.outcome = 'error';
      return result;
    }
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    while (!closed) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
    if (closed) {
      result.outcome = 'closed';
      await reader.cancel().catch(() => {});
    }
  } catch (raw) {
    result.outcome = signal.aborted ? 'deadline' : 'error';
    const error = raw as Error & { cause?: { code?: string; message?: string } };
    const cause = error.cause ? ` (${error.cause.code ?? error.cause.message})` : '';
    if (!signal.aborted) problem(`error: ${error.message}${cause}`);
  } finally {
    settle();
  }
  result.hash = hash.digest('hex');
  return result;
}

async function start(message: Extract<ParentMessage, { type: 'start' }>, go: Promise<void>) {
  const controller = new AbortController();
  setMaxListeners(message.viewers.length + 16, controller.signal); // one deadline for all viewers
  const timer = setTimeout(() => controller.abort(), message.deadlineMs);
  const early = message.viewers.filter((v) => !v.afterGo);
  let connected = 0;
  let readyResolve!: () => void;
  const ready = new Promise<void>((resolve) => (readyResolve = resolve));
  const onHeaders = () => {
    if (++connected === early.length) readyResolve();
  };
  if (early.length === 0) readyResolve();
  const watching = message.viewers.map(async (spec) => {
    if (spec.afterGo) {
      await go;
      await new Promise((resolve) => setTimeout(resolve, spec.delayMs));
      return watch(message.origin, spec, controller.signal, () => {});
    }
    return watch(message.origin, spec, controller.signal, onHeaders);
  });
  await Promise.race([ready, new Promise((resolve) => setTimeout(resolve, message.deadlineMs))]);
  process.send!({ type: 'ready', connected } satisfies ChildMessage);
  const results = await Promise.all(watching);
  clearTimeout(timer);
  const memory = process.memoryUsage();
  const done: ChildMessage = { type: 'done', results, heapUsed: memory.heapUsed, rss: memory.rss };
  await new Promise<void>((resolve) => process.send!(done, undefined, {}, () => resolve()));
}

let goResolve!: () => void;
const go = new Promise<void>((resolve) => (goResolve = resolve));
process.on('message', (message: ParentMessage) => {
  if (message.type === 'start') {
    void start(message, go).then(() => process.disconnect(), (error) => {
      console.error(error);
      process.exit(1);
    });
  } else if (message.type === 'go') {
    goResolve();
  }
});
