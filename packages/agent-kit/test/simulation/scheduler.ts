// The simulation's scheduler: simulated workers (drains, reapers, request handlers) run real
// agent-kit code, but each database statement, transaction and tool call they issue waits here as
// a pending op until the scheduler picks it, so exactly one runs at a time in a seeded order.
// Between ops it waits for every worker to go quiet (only microtasks run in a worker: its timers
// are virtual), which makes the set of pending ops, and so every decision, reproducible.
import { StoreUnavailableError } from '../../src/errors.js';
import { setFakeNow } from '../../src/store/clock.js';
import type { Db } from '../../src/store/db.js';
import { realTick, runInWorker, VirtualClock } from './virtual-time.js';

/** How a picked op runs: normally, or failing as a dropped connection before or after it ran. */
export type OpMode = 'run' | 'fail-before' | 'fail-after';

export type OpKind = 'query' | 'transaction' | 'gate';

export interface PendingOp {
  readonly id: number;
  readonly workerId: number;
  readonly kind: OpKind;
  /** Short name for the log: the SQL function or table, or the gate's name. */
  readonly label: string;
  readonly sql?: string;
  readonly params?: readonly unknown[];
}

interface QueuedOp extends PendingOp {
  execute(mode: OpMode): Promise<OpResult>;
}

export interface OpResult {
  value?: unknown;
  error?: Error;
}

export type WorkerState = 'running' | 'paused' | 'dead';

export interface SimWorker {
  readonly id: number;
  /** e.g. `drain-3`, `reaper-5`, `request-7`. */
  readonly name: string;
  readonly kind: string;
  state: WorkerState;
  /** Its body returned (or threw); a finished worker may still have timers (a hung tool). */
  finished: boolean;
  /** A paused worker may be resumed from this virtual time on. */
  resumeAtMs: number | null;
  pending: QueuedOp[];
  outcome?: unknown;
  error?: Error;
}

const settleRoundsStable = 3; // real macrotask turns without activity that count as "quiet"
const settleRoundsMax = 2_000; // a worker that never goes quiet is a bug to report, not to wait on

/** Label a statement by the agent_kit function it calls or the table it reads. */
export function labelOf(sql: string): string {
  // The function the statement calls; agent_kit_now() only appears inside conditions.
  // A claim that begins its segment in the same statement is a claim.
  const calls = [...sql.matchAll(/agent_kit_([a-z_]+)\s*\(/g)].map((m) => m[1]!).filter((name) => name !== 'now');
  const call = calls.find((name) => name === 'claim_run' || name === 'claim_due_runs') ?? calls[0];
  if (call) return call;
  const write = /^\s*(delete\s+from|update|insert\s+into)\s+agent_kit_([a-z_]+)/i.exec(sql);
  if (write) return `${write[1]!.split(/\s+/)[0]!.toLowerCase()} ${write[2]}`;
  // The main table of a read: the last one named after `from` (earlier ones sit in subqueries).
  const table = [...sql.matchAll(/\bfrom\s+agent_kit_([a-z_]+)/gi)].at(-1);
  if (table) return `read ${table[1]}`;
  const other = /^\s*select\s+(?:\*\s+from\s+)?([a-z_]+)\s*\(/i.exec(sql);
  if (other) return other[1]!;
  return sql.trim().split(/\s+/)[0]!.toLowerCase();
}

export class Scheduler {
  readonly clock: VirtualClock;
  readonly workers: SimWorker[] = [];
  private opCounter = 0;
  private activity = 0;
  private dbClockMs: number | null = null;

  constructor(
    readonly db: Db,
    startMs: number,
    random: () => number,
  ) {
    this.clock = new VirtualClock(startMs, random);
  }

  get nowMs(): number {
    return this.clock.nowMs;
  }

  /** Start a worker: `body` runs in its own context (virtual timers, ops registered here). */
  spawn(kind: string, body: (worker: SimWorker) => Promise<unknown>): SimWorker {
    const worker: SimWorker = {
      id: this.workers.length + 1, name: `${kind}-${this.workers.length + 1}`, kind,
      state: 'running', finished: false, resumeAtMs: null, pending: [],
    };
    this.workers.push(worker);
    this.activity++;
    const done = (outcome: unknown, error?: Error) => {
      worker.finished = true;
      worker.outcome = outcome;
      worker.error = error;
      this.activity++;
    };
    runInWorker(worker.id, () => body(worker)).then(
      (outcome) => done(outcome),
      (raw: unknown) => done(undefined, raw instanceof Error ? raw : new Error(String(raw))),
    );
    return worker;
  }

  /** Queue an op for `workerId`; resolves with `run()`'s value once the scheduler picks it. */
  register<T>(workerId: number, info: Omit<PendingOp, 'id' | 'workerId'>, run: () => Promise<T>): Promise<T> {
    const worker = this.workers[workerId - 1]!;
    // A dead process issues nothing: its statement never reaches the database.
    if (worker.state === 'dead') return new Promise<T>(() => {});
    return new Promise<T>((resolve, reject) => {
      const op: QueuedOp = {
        id: ++this.opCounter, workerId, ...info,
        async execute(mode) {
          if (mode === 'fail-before') {
            const error = new StoreUnavailableError('database unavailable: simulated connection loss before the statement');
            reject(error);
            return { error };
          }
          try {
            const value = await run();
            if (mode === 'fail-after') {
              const error = new StoreUnavailableError('database unavailable: simulated connection loss after the commit');
              reject(error);
              return { value, error };
            }
            resolve(value);
            return { value };
          } catch (raw) {
            const error = raw instanceof Error ? raw : new Error(String(raw));
            reject(error);
            return { error };
          }
        },
      };
      worker.pending.push(op);
      this.activity++;
    });
  }

  /** Ops that may run now (of workers neither paused nor dead), oldest first. */
  eligibleOps(): PendingOp[] {
    return this.workers.filter((w) => w.state === 'running').flatMap((w) => w.pending).sort((a, b) => a.id - b.id);
  }

  isEligible = (workerId: number): boolean => this.workers[workerId - 1]?.state === 'running';

  /** Run one pending op, then wait until every worker is quiet again. */
  async runOp(op: PendingOp, mode: OpMode = 'run'): Promise<OpResult> {
    const worker = this.workers[op.workerId - 1]!;
    const index = worker.pending.findIndex((p) => p.id === op.id);
    if (index < 0) throw new Error(`op ${op.id} is not pending`);
    const [queued] = worker.pending.splice(index, 1);
    await this.syncDbClock();
    const result = await queued!.execute(mode);
    await this.settle();
    return result;
  }

  /** The dead process's statements never run and its timers never fire. */
  kill(worker: SimWorker): void {
    worker.state = 'dead';
    worker.pending = [];
    this.clock.dropWorker(worker.id);
    this.activity++;
  }

  pause(worker: SimWorker, resumeAtMs: number): void {
    worker.state = 'paused';
    worker.resumeAtMs = resumeAtMs;
    this.activity++;
  }

  async resume(worker: SimWorker): Promise<void> {
    worker.state = 'running';
    worker.resumeAtMs = null;
    // Timers that came due while it was stopped fire now, as they would after SIGCONT.
    await this.advanceTo(this.nowMs);
  }

  /** Earliest timer of a running worker, if any. */
  nextTimerMs(): number | undefined {
    return this.clock.nextDue(this.isEligible)?.dueMs;
  }

  /** Move virtual time to `targetMs`, firing due timers in order and settling after each. */
  async advanceTo(targetMs: number): Promise<number> {
    let fired = 0;
    for (;;) {
      const timer = this.clock.nextDue(this.isEligible);
      if (!timer || timer.dueMs > targetMs) break;
      this.clock.nowMs = Math.max(this.clock.nowMs, timer.dueMs);
      this.clock.fire(timer);
      fired++;
      await this.settle();
    }
    this.clock.nowMs = Math.max(this.clock.nowMs, targetMs);
    return fired;
  }

  /** agent_kit_now() follows virtual time; written lazily, before the next statement needs it. */
  async syncDbClock(): Promise<void> {
    if (this.dbClockMs === this.nowMs) return;
    await setFakeNow(this.db, new Date(this.nowMs));
    this.dbClockMs = this.nowMs;
  }

  /** Wait until no worker registers an op, sets a timer or finishes for a few macrotask turns. */
  async settle(): Promise<void> {
    let seen = -1;
    let stable = 0;
    for (let round = 0; round < settleRoundsMax; round++) {
      await realTick();
      const now = this.activity + this.clock.activity;
      if (now === seen) {
        if (++stable >= settleRoundsStable) return;
      } else {
        seen = now;
        stable = 0;
      }
    }
    throw new Error(`workers did not go quiet within ${settleRoundsMax} macrotask turns`);
  }

  /** Workers that can still do something: running or paused, unfinished or holding timers. */
  activeWorkers(): SimWorker[] {
    return this.workers.filter((w) => w.state !== 'dead' && (!w.finished || w.pending.length > 0 || this.clock.pendingFor(w.id) > 0));
  }
}
