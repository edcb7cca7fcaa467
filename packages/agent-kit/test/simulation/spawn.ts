// Starting simulated workers and moving time, the building blocks of the scheduler's actions:
// a chat request (a message, then its segment), a drain, a reaper pass, a second segment for a run
// that may be running, and time advancing to the next timer or by a jump.
import { drainQueue } from '../../src/queue/index.js';
import { startTurn } from '../../src/queue/start-turn.js';
import { reapExpiredRuns } from '../../src/reaper/index.js';
import { runSegment } from '../../src/turn/index.js';
import type { RunSnapshot } from './invariants.js';
import type { SimWorker } from './scheduler.js';
import type { Simulation } from './simulation.js';
import { outsideWorkers } from './virtual-time.js';
import { workerRuntime } from './world.js';

export interface ActionPick {
  name: string;
  run: () => Promise<string>;
}

/** An action and its weight in the seeded pick. */
export type Candidate = readonly [ActionPick, number];

export const action = (name: string, run: () => Promise<string>): ActionPick => ({ name, run });

const turnTexts = ['hello', 'note this #effect', 'a question #ask', 'pay them #approve', 'note #effect then ask #ask',
  'pay #approve and note #effect', 'think, then note #think #effect'];

export function spawnWorker(
  sim: Simulation, kind: string,
  body: (worker: SimWorker, rt: ReturnType<typeof workerRuntime>, stopSignal: AbortSignal | undefined) => Promise<unknown>,
) {
  return sim.scheduler.spawn(kind, (worker) => {
    const rt = workerRuntime(sim.db, sim.scheduler, worker, sim.profile, sim, sim.engineLog);
    // Its process's stop signal: the 'stop' fault raises it, as a deploy's SIGTERM does. Only in
    // schedules with stops: a signal changes how a segment waits, and so the schedule.
    const stop = new AbortController();
    if (sim.profile.stops) sim.stops.set(worker.id, stop);
    return body(worker, rt, sim.profile.stops ? stop.signal : undefined);
  });
}

export async function settled(sim: Simulation, text: string): Promise<string> {
  await sim.scheduler.settle();
  return text;
}

export function spawnDrain(sim: Simulation): Promise<string> {
  const concurrency = sim.user.between(1, 3);
  const worker = spawnWorker(sim, 'drain', (w, rt, stopSignal) =>
    drainQueue(rt, { budgetMs: sim.profile.drainBudgetMs, concurrency, owner: w.name, runSegment, stopSignal }));
  return settled(sim, `spawn ${worker.name} (concurrency ${concurrency})`);
}

/**
 * Several turns queued at once on new threads, all alike, then one drain for them: their segments
 * stream in step, so their step commits and closes pile up and go out grouped (ADR-0021), where
 * kills, zombies and store failures land on grouped statements too.
 */
export async function burst(sim: Simulation, count: number): Promise<string> {
  const text = sim.user.pick(['hello', 'note this #effect']);
  await sim.scheduler.syncDbClock();
  sim.dirty = true;
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    sim.turnsCreated++;
    const turn = await outsideWorkers(() => startTurn(sim.db, { ownerId: 'u', text: `${text} (message ${sim.turnsCreated})` }));
    sim.noteTurn(turn.threadId, turn.runId);
    names.push(sim.names.of(turn.runId));
  }
  const worker = spawnWorker(sim, 'drain', (w, rt, stopSignal) =>
    drainQueue(rt, { budgetMs: sim.profile.drainBudgetMs, concurrency: count, owner: w.name, runSegment, stopSignal }));
  return settled(sim, `burst: "${text}" as ${names.join(', ')} on new threads; spawn ${worker.name} (concurrency ${count})`);
}

export function spawnReaper(sim: Simulation): Promise<string> {
  const worker = spawnWorker(sim, 'reaper', (w, rt) => reapExpiredRuns(rt, { owner: w.name }));
  return settled(sim, `spawn ${worker.name}`);
}

/** A reaper pass run to its end inside one step (its statements listed), so a drain can follow. */
export async function runReaperNow(sim: Simulation): Promise<string> {
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
 * by NOTIFY, a job delivered twice. The claim must let at most one of them hold the run, and none
 * take a run waiting out a model retry before its time (ADR-0098).
 */
export function duplicateSegment(sim: Simulation, run: RunSnapshot, fault = 'duplicate-segment'): Promise<string> {
  const { invocationBudgetMs: budgetMs, leaseTtlMs } = sim.profile;
  sim.count(sim.faults, fault);
  const worker = spawnWorker(sim, 'request', (w, rt, stopSignal) =>
    runSegment(rt, { runId: run.id, owner: w.name, budgetMs, leaseTtlMs, stopSignal }));
  return settled(sim, `spawn ${worker.name}: a second segment for ${sim.names.of(run.id)} (${run.status})`);
}

/** A user message: through a chat request that runs the turn itself, or queued for the drain. */
export async function newTurn(sim: Simulation): Promise<string> {
  sim.turnsCreated++;
  const useNewThread = sim.threads.length === 0 || (sim.threads.length < sim.profile.threads && sim.user.chance(0.5));
  const threadId = useNewThread ? undefined : sim.user.pick(sim.threads);
  const text = `${sim.user.pick(turnTexts)} (message ${sim.turnsCreated})`;
  const thread = threadId ? sim.names.of(threadId) : 'a new thread';
  const { invocationBudgetMs: budgetMs, leaseTtlMs } = sim.profile;
  if (sim.user.chance(0.6)) {
    const worker = spawnWorker(sim, 'request', async (w, rt, stopSignal) => {
      // The chat route's order: store the message with a delayed fallback job, then run it here.
      const turn = await startTurn(rt.db, { threadId, ownerId: 'u', text, jobDelayMs: budgetMs });
      return runSegment(rt, { runId: turn.runId, owner: w.name, budgetMs, leaseTtlMs, stopSignal });
    });
    return settled(sim, `spawn ${worker.name}: "${text}" on ${thread}`);
  }
  await sim.scheduler.syncDbClock();
  sim.dirty = true;
  const turn = await outsideWorkers(() => startTurn(sim.db, { threadId, ownerId: 'u', text }));
  sim.noteTurn(turn.threadId, turn.runId);
  return `enqueue "${text}" on ${sim.names.of(turn.threadId)} → ${turn.kind} ${sim.names.of(turn.runId)}`;
}

export async function advanceBy(sim: Simulation, ms: number, label: string): Promise<string> {
  const fired = await sim.scheduler.advanceTo(sim.scheduler.nowMs + ms);
  return `${label} +${ms}ms (${fired} timers fired)`;
}

export async function tick(sim: Simulation): Promise<string> {
  const dueMs = sim.scheduler.nextTimerMs()!;
  const deltaMs = dueMs - sim.scheduler.nowMs;
  const fired = await sim.scheduler.advanceTo(dueMs);
  return `tick +${deltaMs}ms (${fired} timers fired)`;
}
