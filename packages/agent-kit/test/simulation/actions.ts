// What the simulator can do at a step, and with what weight: run a worker's pending statement,
// let virtual time pass, start workers (chat request, drain, reaper, a duplicated cron), act as a
// user or operator (spawn.ts, user-actions.ts), or inject a fault (kill a worker, pause it past its
// lease, make it a zombie (zombies.ts), drop a connection before or after a statement, jump
// time). The wind-down picks only from the actions that bring the system to rest.
import { isClosed } from './invariants.js';
import type { Simulation } from './simulation.js';
import {
  action, advanceBy, burst, newTurn, settled, spawnDrain, spawnReaper, tick, type ActionPick, type Candidate,
} from './spawn.js';
import { answer, operator, userActions } from './user-actions.js';
import { hasMovedOn, zombieActions, zombieAtWrite } from './zombies.js';

export type { ActionPick } from './spawn.js';

/** Reaper + drain rounds the wind-down may use; a run still open after them is stuck (livelock). */
const windDownCronsMax = 150;
/** Cron rounds of the wind-down during which a worker may still freeze as a zombie. */
const windDownZombieCrons = 20;

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
    }), 0.25 * chaos]);
  }
  if (pausable.length) {
    candidates.push([action('pause', async () => {
      const worker = sim.pick.pick(pausable);
      const resumeAtMs = scheduler.nowMs + profile.leaseTtlMs + sim.pick.between(1, profile.leaseTtlMs);
      scheduler.pause(worker, resumeAtMs);
      sim.count(sim.faults, 'pause');
      return `pause ${worker.name} for ${resumeAtMs - scheduler.nowMs}ms (past its lease)`;
    }), 0.2 * chaos]);
  }
  // A deploy's SIGTERM to a request or a drain: its segments hand their runs on at the next step
  // boundary, or cut a long step after stopGraceMs (ADR-0117), with no attempt spent.
  const stoppable = pausable.filter((w) => (w.kind === 'request' || w.kind === 'drain') && sim.stops.has(w.id) && !sim.stops.get(w.id)!.signal.aborted);
  if (stoppable.length) {
    candidates.push([action('stop', async () => {
      const worker = sim.pick.pick(stoppable);
      sim.stops.get(worker.id)!.abort();
      sim.count(sim.faults, 'stop');
      return settled(sim, `stop ${worker.name} (a deploy's SIGTERM)`);
    }), 0.05 * chaos]); // deploys are rarer than crashes
  }
  candidates.push(...zombieActions(sim, chaos));
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

/** The faulty phase: everything may happen. */
export function chooseAction(sim: Simulation): ActionPick {
  const { scheduler, profile } = sim;
  const chaos = profile.chaos;
  const zombie = zombieAtWrite(sim);
  if (zombie) return zombie;
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
  const room = profile.turns - sim.turnsCreated;
  if (room >= 3) candidates.push([action('burst', () => burst(sim, Math.min(room, 5))), 0.6]);
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
  // Zombies still strike early in the wind-down, where most runs close: they delay, never block.
  const zombie = sim.windDownCrons < windDownZombieCrons ? zombieAtWrite(sim) : undefined;
  if (zombie) return zombie;
  const paused = scheduler.workers.find((w) => w.state === 'paused' && hasMovedOn(sim, w));
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
  const sleeping = scheduler.workers.find((w) => w.state === 'paused');
  if (sim.runs.every((r) => isClosed(r.status))) {
    return sleeping ? action('resume', async () => (await scheduler.resume(sleeping), `resume ${sleeping.name}`)) : undefined;
  }
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
