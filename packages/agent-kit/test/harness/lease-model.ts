// A pure TypeScript reference model of the run state machine that sql/migrations/0003 (and 0004's
// guarded close) implement: what each lease function returns and how it changes the run row,
// the job, the inputs, the effects and the thread's event log. The property test runs the same
// commands against SQL and this model and compares them step by step; the model also checks the
// DESIGN.md §6 invariants on its own state, so agreement means the SQL keeps them too.

export type RunStatus =
  | 'queued' | 'waiting_input' | 'waiting_takeover' | 'running' | 'completed' | 'failed' | 'aborted';
export type ParkStatus = 'queued' | 'waiting_input' | 'waiting_takeover';
export type CloseStatus = 'completed' | 'failed' | 'aborted';
export type EffectStatus = 'started' | 'completed' | 'failed' | 'in_doubt';

const openStatuses: readonly RunStatus[] = ['queued', 'running', 'waiting_input', 'waiting_takeover'];
const activeStatuses: readonly RunStatus[] = ['running', 'waiting_input', 'waiting_takeover'];
export const isClosed = (s: RunStatus) => !openStatuses.includes(s);

/** A run as the model sees it; times are fake-clock milliseconds since the scenario started. */
export interface ModelRun {
  thread: number;
  turnNo: number;
  status: RunStatus;
  owner: string | null;
  fence: number;
  attempts: number;
  leaseMs: number | null;
  deadlineMs: number | null;
  heartbeatMs: number | null;
  partial: string;
  waitingFor: { id: string } | null;
  cancel: boolean;
  takeover: boolean;
  takenOverBy: string | null;
  hasJob: boolean;
  answers: { text: string; partial: boolean }[];
  /** question id → fence that consumed it (null = not yet consumed), in question order. */
  inputs: Record<string, number | null>;
  effects: Record<string, { status: EffectStatus; fence: number }>;
}

export interface ModelEvent {
  type: string;
  run: number | null;
  fence: number;
}

/** What a call returned, or the typed error it raised (by class name). */
export type Outcome = unknown;
const conflict = { error: 'ConflictError' } as const;

export class LeaseModel {
  nowMs = 0;
  readonly runs: ModelRun[] = [];
  readonly events: ModelEvent[][] = [];
  readonly userMessages: number[] = [];

  /** agent_kit_start_turn for a new run in `thread` (threads are created on first use). */
  startTurn(thread: number): number {
    while (this.events.length <= thread) {
      this.events.push([]);
      this.userMessages.push(0);
    }
    this.userMessages[thread]! += 1;
    const turnNo = this.runs.filter((r) => r.thread === thread).length + 1;
    this.runs.push({
      thread, turnNo, status: 'queued', owner: null, fence: 0, attempts: 0, leaseMs: null,
      deadlineMs: null, heartbeatMs: null, partial: '', waitingFor: null, cancel: false,
      takeover: false, takenOverBy: null, hasJob: true, answers: [], inputs: {}, effects: {},
    });
    const run = this.runs.length - 1;
    this.append(run, 'message', 0);
    this.append(run, 'run-queued', 0);
    return run;
  }

  /** The thread's run waiting for input: a new message is its answer (ADR-0001). */
  waitingRunOf(thread: number): number {
    return this.runs.findIndex((r) => r.thread === thread && r.status === 'waiting_input');
  }

  /**
   * agent_kit_start_turn on an existing thread: the answer to its waiting run (question id from
   * waiting_for, 'message' when none), else a new queued run. One transaction: a refused answer
   * leaves no message behind.
   */
  sendMessage(thread: number): Outcome {
    const waiting = this.waitingRunOf(thread);
    if (waiting < 0) return { kind: 'turn', run: this.startTurn(thread) };
    const r = this.runs[waiting]!;
    const question = r.waitingFor?.id ?? 'message';
    if (question in r.inputs) return conflict; // with no recorded question, any answer is taken (0008)
    this.userMessages[thread]! += 1;
    this.append(waiting, 'message', 0);
    this.submitInput(waiting, question);
    return { kind: 'input', run: waiting };
  }

  advance(ms: number): void {
    this.nowMs += ms;
  }

  private append(run: number, type: string, fence: number): number {
    const log = this.events[this.runs[run]!.thread]!;
    log.push({ type, run, fence });
    return log.length;
  }

  /** An earlier turn of the same thread is still open: this run must wait. */
  private isBlocked(run: number): boolean {
    const r = this.runs[run]!;
    return this.runs.some((e) => e.thread === r.thread && e.turnNo < r.turnNo && openStatuses.includes(e.status));
  }

  /** The guard of every fenced write: (owner, fence) match and the run is running. */
  private holds(run: number, owner: string, fence: number): boolean {
    const r = this.runs[run]!;
    return r.status === 'running' && r.owner !== null && r.owner === owner && r.fence === fence;
  }

  private isExpired(r: ModelRun): boolean {
    return r.leaseMs !== null && r.leaseMs <= this.nowMs;
  }

  claim(run: number, owner: string, ttlMs: number, budgetMs: number): Outcome {
    const r = this.runs[run]!;
    const claimable = r.status === 'queued'
      || (r.status === 'running' && this.isExpired(r))
      || ((r.status === 'waiting_input' || r.status === 'waiting_takeover') && r.cancel);
    if (!claimable || this.isBlocked(run)) {
      if (isClosed(r.status)) return { claimed: false, reason: 'closed' };
      if (r.status === 'running') return { claimed: false, reason: 'busy' };
      return { claimed: false, reason: this.isBlocked(run) ? 'blocked' : 'waiting' };
    }
    Object.assign(r, {
      status: 'running', owner, fence: r.fence + 1, attempts: r.attempts + 1,
      deadlineMs: this.nowMs + budgetMs, leaseMs: this.nowMs + Math.min(ttlMs, budgetMs),
      heartbeatMs: this.nowMs, hasJob: false,
    });
    return { claimed: true, owner, fence: r.fence, attempts: r.attempts, leaseMs: r.leaseMs, deadlineMs: r.deadlineMs };
  }

  renew(run: number, owner: string, fence: number, ttlMs: number): Outcome {
    const r = this.runs[run]!;
    if (!this.holds(run, owner, fence) || this.isExpired(r)) return false;
    r.leaseMs = Math.min(this.nowMs + ttlMs, r.deadlineMs ?? Infinity);
    r.heartbeatMs = this.nowMs;
    return true;
  }

  mirror(run: number, owner: string, fence: number, delta: string): Outcome {
    const r = this.runs[run]!;
    if (!this.holds(run, owner, fence)) return { ok: false };
    r.partial += delta;
    r.heartbeatMs = this.nowMs;
    const seq = delta === '' ? null : this.append(run, 'text-delta', fence);
    return { ok: true, seq, interrupt: r.cancel ? 'cancel' : r.takeover ? 'takeover' : null };
  }

  beginSegment(run: number, owner: string, fence: number, partial: string): Outcome {
    const r = this.runs[run]!;
    if (!this.holds(run, owner, fence)) return null;
    r.partial = partial;
    r.heartbeatMs = this.nowMs;
    return this.append(run, 'segment-started', fence);
  }

  appendEvent(run: number, owner: string, fence: number): Outcome {
    return this.holds(run, owner, fence) ? this.append(run, 'note', fence) : null;
  }

  /** A stored intent wins over the requested status: cancel, then takeover, then an answer. */
  park(run: number, owner: string, fence: number, status: ParkStatus, question: string | null): Outcome {
    const r = this.runs[run]!;
    if (!this.holds(run, owner, fence)) return false;
    // Only the answer to the question being waited for requeues (migration 0008); with no
    // recorded question, any unconsumed answer does.
    const waitedFor = question ?? r.waitingFor?.id ?? null;
    const hasUnconsumedInput = Object.entries(r.inputs).some(
      ([id, consumed]) => consumed === null && (waitedFor === null || id === waitedFor),
    );
    let next: RunStatus = status;
    if (r.cancel) next = 'queued';
    else if (r.takeover) next = 'waiting_takeover';
    else if (status === 'waiting_takeover') next = 'queued'; // a takeover released since: held by nobody else (0044)
    else if (status === 'waiting_input' && hasUnconsumedInput) next = 'queued';
    Object.assign(r, {
      status: next, owner: null, leaseMs: null, deadlineMs: null, attempts: 0, takeover: false,
      waitingFor: question === null ? r.waitingFor : { id: question },
    });
    this.append(run, 'run-parked', fence);
    if (next === 'queued') r.hasJob = true;
    return true;
  }

  close(run: number, owner: string, fence: number, status: CloseStatus, text: string): Outcome {
    const r = this.runs[run]!;
    if (!this.holds(run, owner, fence)) return null;
    r.answers.push({ text, partial: status !== 'completed' });
    Object.assign(r, { status, owner: null, leaseMs: null, deadlineMs: null, waitingFor: null, hasJob: false });
    this.append(run, 'run-closed', fence);
    const next = this.runs
      .filter((e) => e.thread === r.thread && e.status === 'queued')
      .sort((a, b) => a.turnNo - b.turnNo)[0];
    if (next) next.hasJob = true;
    return 'message-id';
  }

  submitInput(run: number, question: string): Outcome {
    const r = this.runs[run]!;
    if (r.status !== 'running' && r.status !== 'waiting_input') return conflict;
    if (r.status === 'waiting_input' && r.waitingFor && r.waitingFor.id !== question) return conflict;
    if (question in r.inputs) return conflict;
    r.inputs = sortKeys({ ...r.inputs, [question]: null });
    this.append(run, 'input-received', 0);
    if (r.status === 'running') return 'running';
    r.status = 'queued';
    r.hasJob = true;
    return 'queued';
  }

  consumeInput(run: number, owner: string, fence: number, question: string): Outcome {
    const r = this.runs[run]!;
    if (!this.holds(run, owner, fence)) return null;
    if (!(question in r.inputs) || r.inputs[question] !== null) return null;
    r.inputs[question] = fence;
    return 'data';
  }

  requestCancel(run: number): Outcome {
    const r = this.runs[run]!;
    if (isClosed(r.status)) return r.status;
    if (!r.cancel) {
      r.cancel = true;
      this.append(run, 'cancel-requested', 0);
    }
    if (r.status !== 'running') r.hasJob = true;
    return r.status;
  }

  takeover(run: number, operator: string): Outcome {
    const r = this.runs[run]!;
    if (isClosed(r.status) || r.cancel) return conflict;
    // One holder (migration 0044): another operator's takeover is refused; the same one's is a no-op.
    const held = r.status === 'waiting_takeover' || r.takeover;
    if (held && r.takenOverBy !== null && r.takenOverBy !== operator) return conflict;
    if (this.isBlocked(run)) return conflict;
    if (r.status === 'queued' || r.status === 'waiting_input') {
      Object.assign(r, { status: 'waiting_takeover', takenOverBy: operator, attempts: 0, hasJob: false });
      this.append(run, 'run-parked', 0);
      return 'waiting_takeover';
    }
    if (r.status === 'waiting_takeover' && r.takenOverBy === null) r.takenOverBy = operator;
    if (r.status === 'running' && !r.takeover) {
      Object.assign(r, { takeover: true, takenOverBy: operator });
      this.append(run, 'takeover-requested', 0);
    }
    return r.status;
  }

  release(run: number): Outcome {
    const r = this.runs[run]!;
    if (r.status === 'waiting_takeover') {
      Object.assign(r, { status: 'queued', takenOverBy: null, takeover: false, hasJob: true });
      this.append(run, 'run-released', 0);
      return 'queued';
    }
    if (r.status === 'running' && r.takeover) {
      Object.assign(r, { takenOverBy: null, takeover: false });
      return 'running';
    }
    return conflict;
  }

  recordEffect(run: number, owner: string, fence: number, key: string, status: EffectStatus): Outcome {
    const r = this.runs[run]!;
    if (!this.holds(run, owner, fence)) return [];
    const current = r.effects[key];
    if (status === 'started') {
      if (!current) r.effects = sortKeys({ ...r.effects, [key]: { status, fence } });
      return [{ key, ...r.effects[key]! }];
    }
    if (!current || (current.status !== 'started' && current.status !== 'in_doubt')) return [];
    r.effects[key] = { status, fence };
    return [{ key, status, fence }];
  }

  /** The reaper's reconciliation: only while the run sits expired under the fence it saw. */
  reconcileEffect(run: number, fence: number, key: string, status: Exclude<EffectStatus, 'started'>): Outcome {
    const r = this.runs[run]!;
    if (r.status !== 'running' || r.fence !== fence || !this.isExpired(r)) return false;
    const current = r.effects[key];
    if (!current || current.status !== 'started') return false;
    current.status = status;
    return true;
  }

  /** The reaper takes a run past its crash budget with the next fence, without an attempt. */
  takeForSalvage(run: number, owner: string, ttlMs: number, maxAttempts: number): Outcome {
    const r = this.runs[run]!;
    if (r.status !== 'running' || !this.isExpired(r) || r.attempts < maxAttempts) return { claimed: false };
    Object.assign(r, {
      owner, fence: r.fence + 1, leaseMs: this.nowMs + ttlMs, deadlineMs: this.nowMs + ttlMs, heartbeatMs: this.nowMs,
    });
    return { claimed: true, owner, fence: r.fence, attempts: r.attempts, leaseMs: r.leaseMs, deadlineMs: r.deadlineMs };
  }

  /** DESIGN.md §6 on the model's own state; returns the broken ones (empty = all hold). */
  brokenInvariants(before: { fence: number; status: RunStatus }[]): string[] {
    const broken: string[] = [];
    this.runs.forEach((r, i) => {
      const was = before[i];
      if (was && r.fence !== was.fence && r.fence !== was.fence + 1) broken.push(`run ${i}: fence ${was.fence} → ${r.fence}`);
      if (was && isClosed(was.status) && r.status !== was.status) broken.push(`run ${i}: closed run reopened`);
      if (r.status === 'queued' && !r.hasJob) broken.push(`run ${i}: queued without a job (lost)`);
      if (activeStatuses.includes(r.status) && this.isBlocked(i)) broken.push(`run ${i}: ${r.status} ahead of an earlier open turn`);
      if (isClosed(r.status) && r.answers.length !== 1) broken.push(`run ${i}: closed with ${r.answers.length} answers`);
      if (!isClosed(r.status) && r.answers.length !== 0) broken.push(`run ${i}: open with an answer`);
      if (r.status === 'completed' && r.answers[0]?.partial) broken.push(`run ${i}: completed with a partial answer`);
      if (r.status === 'running' && (r.owner === null || r.leaseMs === null)) broken.push(`run ${i}: running without a lease`);
      if (r.status !== 'running' && r.owner !== null) broken.push(`run ${i}: ${r.status} with an owner`);
      if (r.leaseMs !== null && r.deadlineMs !== null && r.leaseMs > r.deadlineMs) broken.push(`run ${i}: lease past deadline`);
    });
    this.events.forEach((_, thread) => {
      const active = this.runs.filter((r) => r.thread === thread && activeStatuses.includes(r.status));
      if (active.length > 1) broken.push(`thread ${thread}: ${active.length} active runs`);
    });
    return broken;
  }
}

function sortKeys<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}
