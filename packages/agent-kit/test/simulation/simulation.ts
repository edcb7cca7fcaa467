// One simulated schedule: real agent-kit code (turn engine, drain, reaper) run by simulated workers
// over one real database, every statement ordered by a seeded scheduler, with faults injected and
// the invariants checked after every step. Then a wind-down drives the system to quiescence and
// checks that every run ended with the scripted reply. A seed replays exactly. See ADR-0018.
import fs from 'node:fs';
import path from 'node:path';
import type { Db } from '../../src/store/db.js';
import { effectsFile } from '../harness/turn-kit.js';
import { chooseAction, chooseWindDownAction, type ActionPick } from './actions.js';
import { InvariantChecker, isClosed, knownIssues, type RunSnapshot, type Violation } from './invariants.js';
import { Prng } from './prng.js';
import { profileFor, type Profile } from './profile.js';
import { Scheduler, type OpMode, type OpResult, type PendingOp, type SimWorker } from './scheduler.js';
import { prepareDatabase } from './sim-database.js';
import { Names, StepLog } from './step-log.js';
import { installVirtualTime, uninstallVirtualTime } from './virtual-time.js';
import type { FaultSource, ModelFault, ToolFault } from './world.js';

/** Virtual time at which every schedule starts (fixed: replays must not depend on the wall clock). */
export const simulationEpochMs = Date.parse('2030-01-01T00:00:00Z');
const windDownStepsMax = 4_000; // a schedule that cannot reach quiescence in this many steps is stuck

export interface ScheduleResult {
  seed: number;
  ok: boolean;
  steps: number;
  violations: Violation[];
  /** Violations of known, reported issues (see knownIssues): listed, not failures. */
  known: Violation[];
  /** Injected faults by kind. */
  faults: Record<string, number>;
  actions: Record<string, number>;
  runs: Record<string, number>;
  /** Fingerprint of the step log: equal across replays of the seed. */
  digest: string;
  tail: string[];
  virtualMs: number;
  wallMs: number;
  profile: Profile;
}

export interface ScheduleOptions {
  /** Print every step as it happens. */
  echo?: (line: string) => void;
  /** Lines of log tail kept for the failure report. */
  keep?: number;
}

export class Simulation implements FaultSource {
  readonly profile: Profile;
  readonly pick: Prng;
  readonly faultRng: Prng;
  readonly user: Prng;
  readonly scheduler: Scheduler;
  readonly names = new Names();
  readonly log: StepLog;
  readonly checker: InvariantChecker;
  readonly effects = effectsFile();
  step = 0;
  turnsCreated = 0;
  /** Something may have changed since the last check (a statement ran, an effect was written). */
  dirty = true;
  private effectsSize = 0;
  windDownCrons = 0;
  readonly threads: string[] = [];
  readonly answered: { runId: string; questionId: string }[] = [];
  /**
   * Regeneration calls made, as called (ADR-0092), each with the newest run it made and every run
   * it made (one list, shared by the records of one call): the same call again must return the
   * run in the replaced reply's place when the call made it (ADR-0096).
   */
  readonly regenerated: { threadId: string; message: string; text: string | null; replaces: string; runId: string; made: string[] }[] = [];
  /** Runs a regeneration or a restore took the place of: the earlier answers a user may put back. */
  readonly replaced: string[] = [];
  /** Restores made (ADR-0096): the same call again must write nothing while the run is in place. */
  readonly restored: string[] = [];
  /** Workers paused as zombies: the run and fence they held, and when they wake regardless. */
  readonly zombies = new Map<number, { runId: string; fence: number; untilMs: number }>();
  /** The newest op that zombieAtWrite has considered, and the runs it froze a worker of. */
  lastOpSeen = 0;
  readonly frozenRuns = new Set<string>();
  /** Each segment-running worker's stop signal (a deploy's SIGTERM), by worker id. */
  readonly stops = new Map<number, AbortController>();
  readonly faults: Record<string, number> = {};
  readonly actions: Record<string, number> = {};
  readonly violations: Violation[] = [];
  readonly known = new Map<string, Violation>();
  runs: RunSnapshot[] = [];
  private readonly seenFinished = new Set<number>();

  constructor(
    readonly seed: number,
    readonly db: Db,
    options: ScheduleOptions = {},
  ) {
    this.profile = profileFor(seed);
    const root = new Prng(seed);
    this.pick = root.fork('schedule');
    this.faultRng = root.fork('faults');
    this.user = root.fork('user');
    const engine = root.fork('engine');
    this.scheduler = new Scheduler(db, simulationEpochMs, () => engine.next());
    this.log = new StepLog(this.names, options.keep ?? 60, options.echo);
    this.checker = new InvariantChecker(db, this.profile.tokens, this.profile.maxRunAttempts, () => this.effects.lines());
  }

  count(table: Record<string, number>, kind: string): void {
    table[kind] = (table[kind] ?? 0) + 1;
  }

  /**
   * One model call in about seven (at chaos 1) errs or hangs. At one in ten, a retry parked past
   * its segment came in 8 schedules of 100, and a planted bug on that path took 59 seeds to find.
   */
  modelFault(): ModelFault {
    if (!this.faultRng.chance(0.15 * this.profile.chaos)) return { kind: 'none' };
    const kind = this.faultRng.pick(['error', 'hang'] as const);
    this.count(this.faults, `model-${kind}`);
    return { kind, afterParts: this.faultRng.between(0, this.profile.tokens + 3) };
  }

  toolFault(toolName: string): ToolFault {
    if (!this.faultRng.chance(0.25 * this.profile.chaos)) return 'none';
    const fault = this.faultRng.pick(['fail-before', 'fail-after', 'hang', 'hang-then-run'] as const);
    this.count(this.faults, `tool-${fault}`);
    this.note(`tool ${toolName}: injected ${fault}`);
    return fault;
  }

  toolHangMs(): number {
    return this.faultRng.between(1, this.profile.invocationBudgetMs * 3);
  }

  private pendingNotes: string[] = [];
  /** A remark attached to the current step's log line (a fault drawn inside worker code). */
  note(text: string): void {
    this.pendingNotes.push(text);
  }

  /** Run a pending op and record what it did (claims, new turns) for the checks. */
  async runOp(op: PendingOp, mode: OpMode = 'run'): Promise<string> {
    const worker = this.scheduler.workers[op.workerId - 1]!;
    const result = await this.scheduler.runOp(op, mode);
    // Reads change nothing; everything else (a write, a tool's effect) is checked after the step.
    if (mode !== 'fail-before' && !op.label.startsWith('read ') && op.label !== 'now') this.dirty = true;
    await this.observe(op, result);
    const modeText = mode === 'run' ? '' : ` [${mode}]`;
    return `${worker.name} ${op.label}${describeParams(op.params)}${modeText} → ${summarize(result)}`;
  }

  async observe(op: Pick<PendingOp, 'label'>, result: OpResult): Promise<void> {
    const rows = Array.isArray(result.value) ? (result.value as Record<string, any>[]) : [];
    if (op.label === 'start_turn' && rows[0]) this.noteTurn(rows[0].thread_id, rows[0].run_id);
    // A batch claim (claim_due_runs) returns a row per run it claimed.
    const claims = op.label === 'claim_due_runs' ? rows
      : (op.label === 'claim_run' || op.label === 'take_for_salvage') ? rows.slice(0, 1) : [];
    for (const row of claims) {
      this.checkClaim(row.id, Number(row.fence));
      try {
        await this.db.query(
          `insert into sim_claims (run_id, fence, seq_at_claim, step, attempts)
           select $1, $2, last_seq, $3, $5 from agent_kit_threads where id = $4`,
          [row.id, row.fence, this.step, row.thread_id, row.attempts],
        );
      } catch (error) {
        this.violations.push({ kind: 'double-claim', detail: `${row.id} fence ${row.fence} claimed twice: ${String(error)}` });
      }
    }
  }

  /**
   * Invariant 1, at the claim: it took a closed run, or a lease that had not expired, or a run
   * waiting out a model retry before its time with no cancel to close it (ADR-0098).
   */
  private checkClaim(runId: string, fence: number): void {
    const before = this.runs.find((r) => r.id === runId);
    if (!before) return;
    if (isClosed(before.status)) {
      this.violations.push({ kind: 'claim-closed', detail: `${runId} was ${before.status} and got claimed at fence ${fence}` });
    }
    const expiresMs = before.leaseExpiresAt?.getTime();
    if (before.status === 'running' && expiresMs !== undefined && expiresMs > this.scheduler.nowMs) {
      this.violations.push({
        kind: 'claim-live-lease',
        detail: `${runId} claimed at fence ${fence} while fence ${before.fence} held a lease until t+${expiresMs - this.scheduler.nowMs}ms from now`,
      });
    }
    const retryMs = before.retryDueAt?.getTime();
    if (before.status === 'queued' && !before.cancel && retryMs !== undefined && retryMs > this.scheduler.nowMs) {
      this.violations.push({
        kind: 'claim-before-retry',
        detail: `${runId} claimed at fence ${fence} ${retryMs - this.scheduler.nowMs}ms before its model retry was due`,
      });
    }
  }

  noteTurn(threadId: string, runId: string): void {
    if (!this.threads.includes(threadId)) this.threads.push(threadId);
    this.names.add(threadId, 't');
    this.names.add(runId, 'r');
  }

  /** Runs in creation order (ids are random; names are not). */
  sortRuns(runs: RunSnapshot[]): RunSnapshot[] {
    return runs.sort((a, b) => this.names.rank(a.id) - this.names.rank(b.id));
  }

  async run(): Promise<ScheduleResult> {
    const startedWallMs = Date.now();
    installVirtualTime(this.scheduler.clock);
    try {
      await prepareDatabase(this.db, this.seed);
      await this.scheduler.syncDbClock();
      this.runs = await this.checker.snapshot();
      while (this.step < this.profile.scriptSteps && this.violations.length === 0) {
        await this.doStep(chooseAction(this));
      }
      while (this.violations.length === 0) {
        const next = await chooseWindDownAction(this);
        if (!next) break;
        if (this.step >= this.profile.scriptSteps + windDownStepsMax) {
          this.violations.push({ kind: 'liveness', detail: `no quiescence after ${windDownStepsMax} wind-down steps` });
          break;
        }
        await this.doStep(next);
      }
      if (this.violations.length === 0) this.violations.push(...(await this.checker.checkEnded(this.runs)));
    } finally {
      uninstallVirtualTime();
      this.effects.restore();
      fs.rmSync(path.dirname(this.effects.file), { recursive: true, force: true });
    }
    return this.result(Date.now() - startedWallMs);
  }

  private async doStep(action: ActionPick): Promise<void> {
    this.step++;
    this.count(this.actions, action.name);
    let text: string;
    try {
      text = await action.run();
    } catch (error) {
      text = `${action.name} failed: ${String(error)}`;
      this.violations.push({ kind: 'simulator', detail: `${action.name}: ${(error as Error)?.stack ?? String(error)}` });
    }
    const notes = this.pendingNotes.length ? ` (${this.pendingNotes.join('; ')})` : '';
    this.pendingNotes = [];
    this.log.add(this.step, this.scheduler.nowMs, simulationEpochMs, `${text}${notes}`);
    // A hung tool that wakes on a timer writes its effect without a statement: watch the file too.
    const effectsSize = fs.existsSync(this.effects.file) ? fs.statSync(this.effects.file).size : 0;
    if (this.dirty || effectsSize !== this.effectsSize) {
      this.runs = this.sortRuns(await this.checker.snapshot());
      this.record(await this.checker.check(this.runs));
      this.dirty = false;
      this.effectsSize = effectsSize;
    }
    this.record(this.checkWorkers());
  }

  /** Keep new violations; a known issue is noted once per run and does not stop the schedule. */
  private record(found: Violation[]): void {
    for (const violation of found) {
      if (!(violation.kind in knownIssues)) {
        this.violations.push(violation);
        continue;
      }
      const key = `${violation.kind} ${violation.detail.split(' ')[0]}`;
      if (!this.known.has(key)) this.known.set(key, { ...violation, detail: `${violation.detail} (step ${this.step})` });
    }
  }

  /** A worker that threw something other than a (simulated) store outage has hit a bug. */
  private checkWorkers(): Violation[] {
    const found: Violation[] = [];
    for (const worker of this.scheduler.workers) {
      if (!worker.finished || this.seenFinished.has(worker.id)) continue;
      this.seenFinished.add(worker.id);
      if (worker.error && (worker.error as { code?: string }).code !== 'STORE_UNAVAILABLE') {
        found.push({ kind: 'worker-crash', detail: `${worker.name}: ${worker.error.stack ?? worker.error.message}` });
      }
    }
    return found;
  }

  /** The engine's log: a segment error that is not an injected outage is a bug. */
  engineLog = (entry: Record<string, unknown>): void => {
    if (entry.msg === 'segment error' && !/simulated|database unavailable/.test(String(entry.error))) {
      this.violations.push({ kind: 'engine-error', detail: this.names.shorten(JSON.stringify(entry)) });
    }
  };

  workerByName(name: string): SimWorker | undefined {
    return this.scheduler.workers.find((w) => w.name === name);
  }

  private result(wallMs: number): ScheduleResult {
    const runs: Record<string, number> = {};
    for (const run of this.runs) this.count(runs, run.status);
    return {
      seed: this.seed, ok: this.violations.length === 0, steps: this.step,
      violations: this.violations.map((v) => ({ kind: v.kind, detail: this.names.shorten(v.detail) })),
      known: [...this.known.values()].map((v) => ({ kind: v.kind, detail: this.names.shorten(v.detail) })),
      faults: this.faults, actions: this.actions, runs, digest: this.log.digest(), tail: this.log.tail(),
      virtualMs: this.scheduler.nowMs - simulationEpochMs, wallMs, profile: this.profile,
    };
  }
}

function describeParams(params: readonly unknown[] | undefined): string {
  if (!params?.length) return '';
  const first = params[0];
  return typeof first === 'string' && /^[0-9a-f-]{36}$/.test(first) ? ` ${first}` : '';
}

const summaryKeys = ['id', 'status', 'fence', 'attempts', 'ok', 'seq', 'outcome', 'run_id', 'kind', 'data'];

/** A deterministic one-line summary of an op's result (no wall-clock timestamps). */
export function summarize(result: OpResult): string {
  const error = result.error ? `error ${result.error.name}: ${result.error.message.slice(0, 80)}` : '';
  const value = result.value;
  if (!Array.isArray(value)) return error || (value === undefined ? 'ok' : String(value).slice(0, 60));
  const rows = value as Record<string, unknown>[];
  const first = rows[0];
  let text = `${rows.length} row${rows.length === 1 ? '' : 's'}`;
  if (first) {
    const keys = Object.keys(first);
    const shown = keys.length === 1 ? keys : keys.filter((key) => summaryKeys.includes(key));
    const parts = shown.map((key) => `${key}=${stringify(first[key])}`);
    if (parts.length) text += ` ${parts.join(' ')}`;
  }
  return error ? `${text}, then ${error}` : text;
}

function stringify(value: unknown): string {
  if (value instanceof Date) return `t+${value.getTime() - simulationEpochMs}ms`;
  if (typeof value === 'object' && value !== null) return JSON.stringify(value).slice(0, 60);
  return String(value).slice(0, 60);
}

/** Run one schedule on `db` (migrated, empty). */
export async function runSchedule(seed: number, db: Db, options: ScheduleOptions = {}): Promise<ScheduleResult> {
  return new Simulation(seed, db, options).run();
}
