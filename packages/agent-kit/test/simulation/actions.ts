// What the simulator can do at a step, and with what weight: run a worker's pending statement,
// let virtual time pass, start workers (chat request, drain, reaper, a duplicated cron), act as a
// user or operator (new message, answer, cancel, takeover, release), or inject a fault (kill a
// worker, pause it past its lease, drop a connection before or after a statement). The wind-down
// picks only from the actions that bring the system to rest.
import { drainQueue } from '../../src/queue/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import { reapExpiredRuns } from '../../src/reaper/index.js';
import { runSegment } from '../../src/turn/index.js';
import { hashFnv1a } from '../../src/model/scripted-reply.js';
import { isClosed, type RunSnapshot } from './invariants.js';
import type { Simulation } from './simulation.js';
import type { SimWorker } from './scheduler.js';
import { outsideWorkers } from './virtual-time.js';
import { workerRuntime } from './world.js';

export interface ActionPick {
  name: string;
  run: () => Promise<string>;
}

type Candidate = readonly [ActionPick, number];

const turnTexts = ['hello', 'note this #effect', 'a question #ask', 'pay them #approve', 'note #effect then ask #ask',
  'pay #approve and note #effect'];

/** Statements that only the lease holder may make. */
const guardedLabels = new Set(['mirror_partial', 'begin_segment', 'record_step', 'record_effect', 'close_run',
  'park_run', 'append_event', 'fail_segment', 'renew_lease', 'transaction']);

/** Reaper + drain rounds the wind-down may use; a run still open after them is stuck (livelock). */
const windDownCronsMax = 150;

const action = (name: string, run: () => Promise<string>): ActionPick => ({ name, run });

function spawnWorker(sim: Simulation, kind: string, body: (worker: SimWorker, rt: ReturnType<typeof workerRuntime>) => Promise<unknown>) {
  return sim.scheduler.spawn(kind, (worker) => {
    const rt = workerRuntime(sim.db, sim.scheduler, worker, sim.profile, sim, sim.engineLog);
    return body(worker, rt);
  });
}

async function settled(sim: Simulation, text: string): Promise<string> {
  await sim.scheduler.settle();
  return text;
}

export function spawnDrain(sim: Simulation): Promise<string> {
  const concurrency = sim.user.between(1, 3);
  const worker = spawnWorker(sim, 'drain', (w, rt) =>
    drainQueue(rt, { budgetMs: sim.profile.drainBudgetMs, concurrency, owner: w.name, runSegment }));
  return settled(sim, `spawn ${worker.name} (concurrency ${concurrency})`);
}

export function spawnReaper(sim: Simulation): Promise<string> {
  const worker = spawnWorker(sim, 'reaper', (w, rt) => reapExpiredRuns(rt, { owner: w.name }));
  return settled(sim, `spawn ${worker.name}`);
}

/** A reaper pass run to its end inside one step (its statements listed), so a drain can follow. */
async function runReaperNow(sim: Simulation): Promise<string> {
  const spawned = await spawnReaper(sim);
  const reaper = sim.scheduler.workers.at(-1)!;
  const done: string[] = [];
  for (let i = 0; i < 200 && !reaper.finished; i++) {
    const op = sim.scheduler.eligibleOps().find((o) => o.workerId === reaper.id);
    if (!op) break;
    done.push(await sim.runOp(op));
  }
  return `${spawned} [${done.map((line) => line.replace(`${reaper.name} `, '')).join('; ')}]`;
}

/**
 * A second segment for a run that may already be running: a retried chat request, a worker woken
 * by NOTIFY, a job delivered twice. The claim must let at most one of them hold the run.
 */
function duplicateSegment(sim: Simulation, run: RunSnapshot): Promise<string> {
  const { invocationBudgetMs: budgetMs, leaseTtlMs } = sim.profile;
  sim.count(sim.faults, 'duplicate-segment');
  const worker = spawnWorker(sim, 'request', (w, rt) => runSegment(rt, { runId: run.id, owner: w.name, budgetMs, leaseTtlMs }));
  return settled(sim, `spawn ${worker.name}: a second segment for ${sim.names.of(run.id)} (${run.status})`);
}

/** A user message: through a chat request that runs the turn itself, or queued for the drain. */
async function newTurn(sim: Simulation): Promise<string> {
  sim.turnsCreated++;
  const useNewThread = sim.threads.length === 0 || (sim.threads.length < sim.profile.threads && sim.user.chance(0.5));
  const threadId = useNewThread ? undefined : sim.user.pick(sim.threads);
  const text = `${sim.user.pick(turnTexts)} (message ${sim.turnsCreated})`;
  const thread = threadId ? sim.names.of(threadId) : 'a new thread';
  const { invocationBudgetMs: budgetMs, leaseTtlMs } = sim.profile;
  if (sim.user.chance(0.6)) {
    const worker = spawnWorker(sim, 'request', async (w, rt) => {
      // The chat route's order: store the message with a delayed fallback job, then run it here.
      const turn = await startTurn(rt.db, { threadId, ownerId: 'u', text, jobDelayMs: budgetMs });
      return runSegment(rt, { runId: turn.runId, owner: w.name, budgetMs, leaseTtlMs });
    });
    return settled(sim, `spawn ${worker.name}: "${text}" on ${thread}`);
  }
  await sim.scheduler.syncDbClock();
  sim.dirty = true;
  const turn = await outsideWorkers(() => startTurn(sim.db, { threadId, ownerId: 'u', text }));
  sim.noteTurn(turn.threadId, turn.runId);
  return `enqueue "${text}" on ${sim.names.of(turn.threadId)} → ${turn.kind} ${sim.names.of(turn.runId)}`;
}

/** Call one of the public SQL functions as the app would; an error is an answer, not a crash. */
async function callSql(sim: Simulation, sql: string, params: unknown[]): Promise<{ text: string; code?: string }> {
  await sim.scheduler.syncDbClock();
  sim.dirty = true;
  try {
    const rows = await sim.db.query<Record<string, unknown>>(sql, params);
    return { text: `→ ${JSON.stringify(Object.values(rows[0] ?? {})[0] ?? null)}` };
  } catch (raw) {
    const error = raw as Error & { code?: string };
    return { text: `→ ${error.name} ${error.code ?? ''}`.trim(), code: error.code };
  }
}

function answerData(sim: Simulation, run: RunSnapshot) {
  return run.waitingFor?.kind === 'approval' ? { approved: sim.user.chance(0.7) } : { answer: sim.user.pick(['blue', 'green']) };
}

async function answer(sim: Simulation, run: RunSnapshot): Promise<string> {
  const questionId = run.waitingFor!.id!;
  const name = sim.names.of(run.id);
  if (sim.user.chance(0.3)) {
    // A message sent while the run waits is its answer (ADR-0001).
    const text = run.waitingFor?.kind === 'approval' ? sim.user.pick(['yes', 'no']) : 'blue please';
    await sim.scheduler.syncDbClock();
    sim.dirty = true;
    const turn = await outsideWorkers(() => startTurn(sim.db, { threadId: run.threadId, ownerId: 'u', text }));
    sim.answered.push({ runId: run.id, questionId });
    return `answer ${name} by message "${text}" → ${turn.kind}`;
  }
  const data = answerData(sim, run);
  const result = await callSql(sim, 'select agent_kit_submit_input($1, $2, $3::jsonb) as status', [run.id, questionId, JSON.stringify(data)]);
  if (!result.code) sim.answered.push({ runId: run.id, questionId });
  return `answer ${name} ${JSON.stringify(data)} ${result.text}`;
}

async function answerAgain(sim: Simulation): Promise<string> {
  const { runId, questionId } = sim.user.pick(sim.answered);
  sim.count(sim.faults, 'answer-again');
  const result = await callSql(sim, 'select agent_kit_submit_input($1, $2, $3::jsonb) as status', [runId, questionId, '{"answer":"again"}']);
  if (!result.code) sim.violations.push({ kind: 'duplicate-answer', detail: `${runId}: a second answer to ${questionId} was accepted` });
  return `answer ${sim.names.of(runId)} again ${result.text}`;
}

/** The question id the scripted model will ask with for this run (it is derived from the texts). */
async function expectedQuestionId(sim: Simulation, run: RunSnapshot): Promise<string> {
  const rows = await sim.db.query<{ text: string }>(
    `select (select m.content->>'text' from agent_kit_messages m where m.run_id = r.id and m.role = 'user'
             order by m.created_at limit 1) as text
     from agent_kit_runs r where r.thread_id = $1 and r.turn_no <= $2 order by r.turn_no`,
    [run.threadId, run.turnNo],
  );
  const hash = hashFnv1a(rows.map((r) => r.text).join('\u0000')).toString(16).padStart(8, '0');
  return `scripted-ask_user-${hash}`;
}

/** An answer that arrives while the run is still running: the right question, or a wrong one. */
async function answerEarly(sim: Simulation, run: RunSnapshot, wrong: boolean): Promise<string> {
  const questionId = wrong ? 'no-such-question' : await expectedQuestionId(sim, run);
  sim.count(sim.faults, wrong ? 'answer-wrong-question' : 'answer-early');
  const result = await callSql(sim, 'select agent_kit_submit_input($1, $2, $3::jsonb) as status',
    [run.id, questionId, '{"answer":"early"}']);
  if (!result.code) sim.answered.push({ runId: run.id, questionId });
  return `answer ${sim.names.of(run.id)} early to ${wrong ? 'a wrong question' : 'its question'} ${result.text}`;
}

async function operator(sim: Simulation, verb: 'cancel' | 'takeover' | 'release', run: RunSnapshot): Promise<string> {
  const sql = {
    cancel: 'select agent_kit_request_cancel($1) as status',
    takeover: `select agent_kit_takeover_run($1, 'operator') as status`,
    release: 'select agent_kit_release_run($1) as status',
  }[verb];
  if (verb !== 'release') sim.count(sim.faults, verb);
  const result = await callSql(sim, sql, [run.id]);
  return `${verb} ${sim.names.of(run.id)} ${result.text}`;
}

async function advanceBy(sim: Simulation, ms: number, label: string): Promise<string> {
  const fired = await sim.scheduler.advanceTo(sim.scheduler.nowMs + ms);
  return `${label} +${ms}ms (${fired} timers fired)`;
}

async function tick(sim: Simulation): Promise<string> {
  const dueMs = sim.scheduler.nextTimerMs()!;
  const deltaMs = dueMs - sim.scheduler.nowMs;
  const fired = await sim.scheduler.advanceTo(dueMs);
  return `tick +${deltaMs}ms (${fired} timers fired)`;
}

function faultActions(sim: Simulation, chaos: number): Candidate[] {
  const { scheduler, profile } = sim;
  const candidates: Candidate[] = [];
  const alive = scheduler.workers.filter((w) => w.state === 'running' && (!w.finished || w.pending.length > 0));
  const pausable = alive.filter((w) => !w.finished);
  if (alive.length) {
    candidates.push([action('kill', async () => {
      const worker = sim.pick.pick(alive);
      scheduler.kill(worker);
      sim.count(sim.faults, 'kill');
      return `kill ${worker.name} (${worker.pending.length} pending ops dropped)`;
    }), 0.5 * chaos]);
  }
  if (pausable.length) {
    candidates.push([action('pause', async () => {
      const worker = sim.pick.pick(pausable);
      const resumeAtMs = scheduler.nowMs + profile.leaseTtlMs + sim.pick.between(1, profile.leaseTtlMs);
      scheduler.pause(worker, resumeAtMs);
      sim.count(sim.faults, 'pause');
      return `pause ${worker.name} for ${resumeAtMs - scheduler.nowMs}ms (past its lease)`;
    }), 0.3 * chaos]);
  }
  // A zombie: stop a worker right before a guarded write, let its lease run out and the run be
  // handed to another worker, and resume it later; every write it then tries must be rejected.
  const guarded = scheduler.eligibleOps().filter((op) => guardedLabels.has(op.label));
  if (guarded.length) {
    candidates.push([action('zombie', async () => {
      const op = sim.pick.pick(guarded);
      const worker = scheduler.workers[op.workerId - 1]!;
      const resumeAtMs = scheduler.nowMs + profile.leaseTtlMs + sim.pick.between(1, 50);
      scheduler.pause(worker, resumeAtMs);
      const run = sim.runs.find((r) => r.id === op.params?.[0]);
      // It wakes once its run has moved on (or after a while): the interesting interleaving.
      if (run) sim.zombies.set(worker.id, { runId: run.id, fence: run.fence, untilMs: resumeAtMs + 5 * profile.leaseTtlMs });
      sim.count(sim.faults, 'zombie');
      const waited = await advanceBy(sim, resumeAtMs - scheduler.nowMs, 'then time');
      const reaper = await runReaperNow(sim);
      const drain = await spawnDrain(sim);
      return `zombie: pause ${worker.name} before ${op.label}; ${waited}; ${reaper}; ${drain}`;
    }), 0.5 * chaos]);
  }
  const dbOps = scheduler.eligibleOps().filter((op) => op.kind !== 'gate');
  if (dbOps.length) {
    candidates.push([action('store-fault', async () => {
      const op = sim.pick.pick(dbOps);
      const mode = sim.pick.pick(['fail-before', 'fail-after'] as const);
      sim.count(sim.faults, `store-${mode}`);
      return sim.runOp(op, mode);
    }), 0.2 * chaos]);
  }
  candidates.push([action('time-jump', () => {
    sim.count(sim.faults, 'time-jump');
    return advanceBy(sim, sim.pick.between(1, profile.leaseTtlMs * 2), 'jump');
  }), 0.15 * chaos]);
  return candidates;
}

function userActions(sim: Simulation, runs: RunSnapshot[], chaos: number): Candidate[] {
  const candidates: Candidate[] = [];
  const open = runs.filter((r) => !isClosed(r.status));
  for (const run of runs.filter((r) => r.status === 'waiting_input' && r.waitingFor?.id).slice(0, 3)) {
    candidates.push([action('answer', () => answer(sim, run)), 1.5]);
  }
  if (sim.answered.length) candidates.push([action('answer-again', () => answerAgain(sim)), 0.1 * chaos]);
  const asking = runs.filter((r) => r.status === 'running' && !sim.answered.some((a) => a.runId === r.id));
  if (asking.length) {
    candidates.push([action('answer-early', () => answerEarly(sim, sim.pick.pick(asking), false)), 0.1 * chaos]);
    candidates.push([action('answer-wrong', () => answerEarly(sim, sim.pick.pick(asking), true)), 0.05 * chaos]);
  }
  if (open.length) {
    candidates.push([action('duplicate-segment', () => duplicateSegment(sim, sim.pick.pick(open))), 0.25 * chaos]);
    candidates.push([action('cancel', () => operator(sim, 'cancel', sim.pick.pick(open))), 0.04 * chaos]);
    candidates.push([action('takeover', () => operator(sim, 'takeover', sim.pick.pick(open))), 0.06 * chaos]);
  }
  for (const run of runs.filter((r) => r.status === 'waiting_takeover' || (r.status === 'running' && r.takeover)).slice(0, 2)) {
    candidates.push([action('release', () => operator(sim, 'release', run)), 0.8]);
  }
  return candidates;
}

/** A zombie may wake once its run was claimed again or closed, or after its patience ran out. */
function hasMovedOn(sim: Simulation, worker: SimWorker): boolean {
  const zombie = sim.zombies.get(worker.id);
  if (!zombie) return true;
  const run = sim.runs.find((r) => r.id === zombie.runId);
  return !run || run.fence > zombie.fence || isClosed(run.status) || sim.scheduler.nowMs >= zombie.untilMs;
}

/** The faulty phase: everything may happen. */
export function chooseAction(sim: Simulation): ActionPick {
  const { scheduler, profile } = sim;
  const chaos = profile.chaos;
  const ops = scheduler.eligibleOps();
  const candidates: Candidate[] = ops.map((op) => [action('op', () => sim.runOp(op)), 8] as const);
  if (scheduler.nextTimerMs() !== undefined) candidates.push([action('tick', () => tick(sim)), ops.length ? 3 : 40]);
  const resumable = scheduler.workers.filter((w) => w.state === 'paused' && w.resumeAtMs! <= scheduler.nowMs && hasMovedOn(sim, w));
  for (const worker of resumable) {
    candidates.push([action('resume', async () => {
      await scheduler.resume(worker);
      return `resume ${worker.name} (its writes must now be rejected if the run moved on)`;
    }), 3]);
  }
  const paused = scheduler.workers.filter((w) => w.state === 'paused' && !resumable.includes(w));
  if (paused.length && !ops.length) {
    const wakeMs = Math.max(scheduler.nowMs + 1, Math.min(...paused.map((w) => Math.max(w.resumeAtMs!, sim.zombies.get(w.id)?.untilMs ?? 0))));
    candidates.push([action('wait', () => advanceBy(sim, wakeMs - scheduler.nowMs, 'wait for paused')), 2]);
  }
  if (sim.turnsCreated < profile.turns) candidates.push([action('new-turn', () => newTurn(sim)), 1.5]);
  candidates.push([action('drain', () => spawnDrain(sim)), 0.5], [action('reaper', () => spawnReaper(sim)), 0.35]);
  candidates.push([action('cron-twice', async () => {
    sim.count(sim.faults, 'duplicate-cron');
    const first = sim.pick.chance(0.5) ? await spawnDrain(sim) : await spawnReaper(sim);
    const second = sim.pick.chance(0.5) ? await spawnDrain(sim) : await spawnReaper(sim);
    return `duplicated cron: ${first}; ${second}`;
  }), 0.1 * chaos]);
  candidates.push(...userActions(sim, sim.runs, chaos), ...faultActions(sim, chaos));
  return sim.pick.weighted(candidates);
}

/**
 * The wind-down: no more faults or messages. Resume the paused, run what is pending, let time
 * pass, answer questions, release takeovers, and run reaper and drain until every run ended.
 * Returns undefined at quiescence.
 */
export async function chooseWindDownAction(sim: Simulation): Promise<ActionPick | undefined> {
  const { scheduler } = sim;
  const paused = scheduler.workers.find((w) => w.state === 'paused');
  if (paused) return action('resume', async () => (await scheduler.resume(paused), `resume ${paused.name}`));
  const ops = scheduler.eligibleOps();
  if (ops.length) return action('op', () => sim.runOp(sim.pick.pick(ops)));
  if (scheduler.nextTimerMs() !== undefined) return action('tick', () => tick(sim));
  const stuck = scheduler.workers.find((w) => w.state === 'running' && !w.finished);
  if (stuck) {
    sim.violations.push({ kind: 'stuck', detail: `${stuck.name} neither finished nor waits for a statement or timer` });
    return undefined;
  }
  const waiting = sim.runs.find((r) => r.status === 'waiting_input' && r.waitingFor?.id);
  if (waiting) return action('answer', () => answer(sim, waiting));
  const taken = sim.runs.find((r) => r.status === 'waiting_takeover' || (r.status === 'running' && r.takeover));
  if (taken) return action('release', () => operator(sim, 'release', taken));
  if (sim.runs.every((r) => isClosed(r.status))) return undefined;
  if (++sim.windDownCrons > windDownCronsMax) {
    const open = sim.runs.filter((r) => !isClosed(r.status)).map((r) => `${r.id} ${r.status}`);
    sim.violations.push({ kind: 'liveness', detail: `${windDownCronsMax} cron rounds left runs open: ${open.join(', ')}` });
    return undefined;
  }
  return action('cron', async () => {
    const wake = await nextWakeMs(sim);
    const waited = wake > scheduler.nowMs ? await advanceBy(sim, wake - scheduler.nowMs, 'wait for a lease or job') : '';
    const reaper = await spawnReaper(sim);
    const drain = await spawnDrain(sim);
    return [waited, reaper, drain].filter(Boolean).join('; ');
  });
}

/** When the next lease expires or job comes due, whichever is first (now if something is due). */
async function nextWakeMs(sim: Simulation): Promise<number> {
  await sim.scheduler.syncDbClock();
  const rows = await sim.db.query<{ at: Date | null }>(
    `select least(
       (select min(lease_expires_at) from agent_kit_runs where status = 'running'),
       (select min(due_at) from agent_kit_jobs)) as at`,
  );
  const at = rows[0]?.at ? new Date(rows[0].at).getTime() : sim.scheduler.nowMs;
  return Math.max(sim.scheduler.nowMs, at);
}
