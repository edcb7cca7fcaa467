// The load harness: one node:http server on 127.0.0.1 (port 0) over the real engine and the
// scripted model, viewers in a child process (viewer-process.ts) so this process's memory is the
// server's, and two phases: M runs watched by N viewers, and one thread flooded with E events.
// Every viewer's events are checked against the log (exactly once, in order, gapless, ending at
// run-closed); memory is sampled before, during (peak) and after. Everything has a deadline.
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { createHandlers, type Handlers } from '../../src/http/handlers.js';
import { toNodeListener } from '../../src/http/node-server.js';
import { startTurn, type StartTurnResult } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';
import { headerAuth } from '../harness/http-harness.js';
import { makeRuntime } from '../harness/turn-kit.js';
import { checkViewers, logDigest } from './load-checks.js';
import type { ChildMessage, ParentMessage, ViewerResult, ViewerSpec } from './viewer-process.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

export interface LoadServer {
  db: Db;
  handlers: Handlers;
  origin: string;
  /** The most 'close' listeners on one open response (ours excluded): a leak shows here. */
  maxCloseListeners(): number;
  close(): Promise<void>;
}

/** The server under test: the real engine, the scripted model with a per-token delay. */
export async function openLoadServer(
  db: Db, model: { tokens: number; delayMs: number },
): Promise<LoadServer> {
  const rt = makeRuntime(db, model);
  const handlers = createHandlers({ rt, authenticate: headerAuth, chatJobDelayMs: 600_000 });
  const listener = toNodeListener(handlers.handle);
  const open = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    open.add(res);
    res.once('close', () => open.delete(res));
    listener(req, res);
  });
  server.maxConnections = 10_000;
  // A deep accept queue: a crowd of viewers arrives at once (the kernel caps it at somaxconn).
  await new Promise<void>((resolve) => {
    server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, resolve);
  });
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    db, handlers, origin,
    maxCloseListeners: () => Math.max(0, ...[...open].map((res) => res.listenerCount('close') - 1)),
    async close() {
      closeViewers();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await handlers.segments.settle();
    },
  };
}

export interface MemoryFigures {
  baseHeap: number;
  peakHeap: number;
  afterHeap: number;
  baseRss: number;
  peakRss: number;
  afterRss: number;
  /** Heap after a full GC while the viewers are still connected (flood phases only). */
  liveHeap?: number;
}

/** Sample heapUsed and rss every 20 ms between start and stop; base and after follow a full GC. */
class MemorySampler {
  private figures: MemoryFigures;
  private readonly timer: NodeJS.Timeout;
  constructor() {
    gc();
    const { heapUsed, rss } = process.memoryUsage();
    this.figures = {
      baseHeap: heapUsed, peakHeap: heapUsed, afterHeap: 0, baseRss: rss, peakRss: rss, afterRss: 0,
    };
    this.timer = setInterval(() => this.sample(), 20);
  }
  private sample() {
    const { heapUsed, rss } = process.memoryUsage();
    this.figures.peakHeap = Math.max(this.figures.peakHeap, heapUsed);
    this.figures.peakRss = Math.max(this.figures.peakRss, rss);
  }
  /** Collect garbage and record what the live viewers hold. */
  markLive(): void {
    gc();
    this.figures.liveHeap = process.memoryUsage().heapUsed;
  }
  stop(): MemoryFigures {
    this.sample();
    clearInterval(this.timer);
    gc();
    const { heapUsed, rss } = process.memoryUsage();
    return { ...this.figures, afterHeap: heapUsed, afterRss: rss };
  }
}

/** Viewer processes still alive: a phase that throws leaves none behind (see closeViewers). */
const children = new Set<ChildProcess>();

/** Kill any viewer process a failed phase left behind. */
export function closeViewers(): void {
  for (const child of children) child.kill('SIGKILL');
  children.clear();
}

/** The viewers' process: resolves `ready` once the early viewers are connected. */
function spawnViewers(origin: string, viewers: ViewerSpec[], deadlineMs: number) {
  const child: ChildProcess = fork(new URL('./viewer-process.ts', import.meta.url).pathname, [], {
    execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  let onReady!: () => void;
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  const done = new Promise<{ results: ViewerResult[]; clientHeap: number }>((resolve, reject) => {
    const kill = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`viewers did not finish within ${deadlineMs + 30_000} ms`));
    }, deadlineMs + 30_000);
    child.on('message', (message: ChildMessage) => {
      if (message.type === 'ready') onReady();
      if (message.type === 'done') {
        clearTimeout(kill);
        resolve({ results: message.results, clientHeap: message.heapUsed });
      }
    });
    // 'close' comes after the IPC channel drained, so a last message is never lost to 'exit'.
    child.on('close', (code) => {
      clearTimeout(kill);
      onReady();
      reject(new Error(`viewer process exited with ${code} before reporting`));
    });
  });
  child.send({ type: 'start', origin, viewers, deadlineMs } satisfies ParentMessage);
  return { ready, done, go: () => child.send({ type: 'go' } satisfies ParentMessage) };
}

export interface PhaseReport {
  name: string;
  runs: number;
  viewers: number;
  /** Events delivered in total (sum over viewers). */
  delivered: number;
  /** Events in the watched logs (sum over threads). */
  logged: number;
  durationMs: number;
  memory: MemoryFigures;
  /** Viewers that missed, repeated or reordered an event, or did not end at run-closed. */
  failures: string[];
  /** Flood phases: the most 'close' listeners on one viewer's response once it caught up. */
  closeListeners?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * M runs of the real engine, each thread watched by N/M viewers: half connect before the runs
 * start, half at random moments over `spreadMs` after (replay, then live).
 */
export async function runViewersPhase(
  server: LoadServer,
  options: { runs: number; viewers: number; spreadMs: number; deadlineMs: number; seed?: number },
): Promise<PhaseReport> {
  const turns: (StartTurnResult & { user: string })[] = [];
  for (let i = 0; i < options.runs; i++) {
    const user = `user-${i}`;
    const turn = await startTurn(server.db, { ownerId: user, text: `load turn ${i}`, jobDelayMs: 600_000 });
    turns.push({ ...turn, user });
  }
  let state = options.seed ?? 1;
  const random = () => ((state = (state * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  const specs: ViewerSpec[] = Array.from({ length: options.viewers }, (_, i) => {
    const turn = turns[i % turns.length]!;
    const afterGo = i % 2 === 1;
    const delayMs = afterGo ? Math.floor(random() * options.spreadMs) : 0;
    return { threadId: turn.threadId, runId: turn.runId, user: turn.user, afterGo, delayMs };
  });
  const sampler = new MemorySampler();
  const started = Date.now();
  const viewers = options.viewers > 0
    ? spawnViewers(server.origin, specs, options.deadlineMs) : undefined;
  await viewers?.ready;
  for (const turn of turns) server.handlers.segments.start(turn.runId);
  viewers?.go();
  const outcome = viewers ? await viewers.done : { results: [], clientHeap: 0 };
  await withDeadline(server.handlers.segments.settle(), options.deadlineMs, 'the runs did not settle');
  const durationMs = Date.now() - started;
  const memory = sampler.stop();
  const digests = new Map<string, Awaited<ReturnType<typeof logDigest>>>();
  for (const turn of turns) {
    digests.set(turn.threadId, await logDigest(server.db, turn.threadId, turn.runId));
  }
  return {
    name: 'runs', runs: options.runs, viewers: options.viewers, durationMs, memory,
    delivered: outcome.results.reduce((n, r) => n + r.count, 0),
    logged: [...digests.values()].reduce((n, d) => n + d.count, 0),
    failures: checkViewers(outcome.results, digests, options.viewers),
  };
}

/** One thread flooded with `events` events (appended in batches) while `viewers` follow it live. */
export async function runFloodPhase(
  server: LoadServer, options: { events: number; viewers: number; batch: number; deadlineMs: number },
): Promise<PhaseReport> {
  const turn = await startTurn(server.db, { ownerId: 'flood', text: 'flood', jobDelayMs: 600_000 });
  const specs: ViewerSpec[] = Array.from({ length: options.viewers }, () => ({
    threadId: turn.threadId, runId: turn.runId, user: 'flood', afterGo: false, delayMs: 0,
  }));
  const sampler = new MemorySampler();
  const started = Date.now();
  const viewers = spawnViewers(server.origin, specs, options.deadlineMs);
  await viewers.ready;
  viewers.go();
  // startTurn wrote 2 events (message, run-queued); the last one is run-closed.
  const notes = options.events - 3;
  for (let done = 0; done < notes && Date.now() - started < options.deadlineMs; done += options.batch) {
    await server.db.query(
      `select agent_kit__append_event($1, $2, 0, 'note', jsonb_build_object('i', g, 'pad', repeat('x', 64)))
       from generate_series($3::int, $4::int) g`,
      [turn.threadId, turn.runId, done + 1, Math.min(done + options.batch, notes)]);
    await sleep(1);
  }
  // Let the viewers catch up, then measure what the server keeps for them, garbage aside.
  await sleep(1_000);
  sampler.markLive();
  const closeListeners = server.maxCloseListeners();
  await server.db.query(
    `select agent_kit__append_event($1, $2, 0, 'run-closed',
       jsonb_build_object('runId', $3::text, 'status', 'completed'))`,
    [turn.threadId, turn.runId, turn.runId]);
  const outcome = await viewers.done;
  const durationMs = Date.now() - started;
  const memory = sampler.stop();
  const digest = await logDigest(server.db, turn.threadId, turn.runId);
  return {
    name: `flood ${options.events}`, runs: 1, viewers: options.viewers, durationMs, memory, closeListeners,
    delivered: outcome.results.reduce((n, r) => n + r.count, 0), logged: digest.count,
    failures: checkViewers(outcome.results, new Map([[turn.threadId, digest]]), options.viewers),
  };
}

async function withDeadline<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${message} within ${ms} ms`)), ms);
    })]);
  } finally {
    clearTimeout(timer);
  }
}
