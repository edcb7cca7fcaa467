// Segments that HTTP requests start in the background. A segment is deliberately not tied to
// the request that started it: a client that disconnects must not stop its turn. The registry
// lets a server wait for (or slice) the segments still running when it shuts down.
import crypto from 'node:crypto';
import { coerceError } from '../errors.js';
import type { Runtime, RunSegment, SegmentOutcome } from '../turn/types.js';

/** The background segments of one set of handlers. */
export interface SegmentRegistry {
  /** Run a segment of `runId` unless this process already runs one. Never throws. */
  start(runId: string): void;
  /** Run ids with a segment in flight here. */
  active(): string[];
  /** Resolve when every segment in flight (and any started meanwhile) has ended. */
  settle(): Promise<void>;
  /** Ask the segments to park at their next step boundary (SIGTERM), then settle. */
  stop(): Promise<void>;
}

export interface SegmentRegistryOptions {
  rt: Runtime;
  /** Resolves the turn engine (injected, or imported lazily on first use). */
  loadRunSegment: () => Promise<RunSegment>;
  /** A platform hook that keeps the invocation alive for a promise (e.g. Vercel's waitUntil). */
  waitUntil?: (promise: Promise<unknown>) => void;
}

/** Lease owners name the process and a counter, so logs tell segments apart. */
const ownerPrefix = `http-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;
let ownerCounter = 0;

export function createSegmentRegistry(options: SegmentRegistryOptions): SegmentRegistry {
  const inFlight = new Map<string, Promise<SegmentOutcome | undefined>>();
  const stopController = new AbortController();
  const log = options.rt.log;

  async function runOne(runId: string): Promise<SegmentOutcome | undefined> {
    const owner = `${ownerPrefix}-${++ownerCounter}`;
    try {
      const runSegment = await options.loadRunSegment();
      const outcome = await runSegment(options.rt, { runId, owner, stopSignal: stopController.signal });
      log?.({ msg: 'http segment ended', runId, owner, outcome: outcome.kind });
      return outcome;
    } catch (raw) {
      // The run is not lost: its lease expires and the reaper hands it to the drain.
      const error = coerceError(raw);
      log?.({ msg: 'http segment failed', runId, owner, error: error.message, stack: error.stack });
      return undefined;
    }
  }

  return {
    start(runId) {
      if (inFlight.has(runId) || stopController.signal.aborted) return;
      const promise = runOne(runId).finally(() => inFlight.delete(runId));
      inFlight.set(runId, promise);
      options.waitUntil?.(promise);
    },
    active: () => [...inFlight.keys()],
    async settle() {
      while (inFlight.size > 0) await Promise.allSettled([...inFlight.values()]);
    },
    async stop() {
      stopController.abort();
      await this.settle();
    },
  };
}
