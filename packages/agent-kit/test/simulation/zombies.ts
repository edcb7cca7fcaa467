// Zombies: a worker that holds a run's lease stops (a GC pause, a frozen VM, a partition) for
// longer than its lease; the reaper and a drain hand the run on with the next fence; then the
// worker wakes and carries on as if nothing happened. Every write it then tries must be rejected
// (ADR-0004). A zombie strikes now, wherever its worker is, or right as the worker issues a
// guarded write (with a chance per write, higher for rare ones), so that every kind meets one.
import { isClosed, type RunSnapshot } from './invariants.js';
import type { SimWorker } from './scheduler.js';
import type { Simulation } from './simulation.js';
import { action, advanceBy, runReaperNow, spawnDrain, type ActionPick, type Candidate } from './spawn.js';

/** The writes only a lease holder may make, and the chance that one freezes its worker. */
const freezeChance: Record<string, number> = {
  mirror_partial: 0.1, mirror_reasoning: 0.15, renew_lease: 0.03, begin_segment: 0.12, commit_step: 0.2, record_effect: 0.15,
  append_event: 0.15, transaction: 0.25, park_run: 0.3, fail_segment: 0.3, close_run: 0.4,
};

interface Holder {
  worker: SimWorker;
  run: RunSnapshot;
}

/** Running workers that hold the lease of a running run (a drain's segments are `<drain>-<n>`). */
function leaseHolders(sim: Simulation): Holder[] {
  const found: Holder[] = [];
  for (const run of sim.runs) {
    if (run.status !== 'running' || !run.owner) continue;
    const worker = sim.scheduler.workers.find((w) => w.state === 'running' && !w.finished &&
      (run.owner === w.name || run.owner!.startsWith(`${w.name}-`)));
    if (worker) found.push({ worker, run });
  }
  return found;
}

/** Stop `worker` past its lease on `run`, let the reaper and a drain hand the run on. */
async function freeze(sim: Simulation, { worker, run }: Holder, where: string): Promise<string> {
  const { scheduler, profile } = sim;
  const expiresMs = Math.max(scheduler.nowMs, run.leaseExpiresAt?.getTime() ?? scheduler.nowMs);
  const resumeAtMs = expiresMs + sim.pick.between(1, 50);
  scheduler.pause(worker, resumeAtMs);
  // It wakes once its run has moved on (or after a while): the interesting interleaving.
  // Patience: a few TTLs, and at least a few of the drain's 1 s polls and job locks.
  const patienceMs = Math.max(5 * profile.leaseTtlMs, 3_000);
  sim.zombies.set(worker.id, { runId: run.id, fence: run.fence, untilMs: resumeAtMs + patienceMs });
  sim.count(sim.faults, 'zombie');
  const waited = await advanceBy(sim, resumeAtMs - scheduler.nowMs, 'then time');
  const reaper = await runReaperNow(sim);
  const drain = await spawnDrain(sim);
  return `zombie: pause ${worker.name} holding ${sim.names.of(run.id)} at fence ${run.fence} ${where}; ` +
    `${waited}; ${reaper}; ${drain}`;
}

/** A zombie that strikes now, wherever its worker is. */
export function zombieActions(sim: Simulation, chaos: number): Candidate[] {
  const holders = leaseHolders(sim);
  if (!holders.length) return [];
  return [[action('zombie', () => {
    const holder = sim.pick.pick(holders);
    const pending = holder.worker.pending.map((op) => op.label).join(', ') || 'nothing pending';
    return freeze(sim, holder, `(${pending})`);
  }), 0.3 * chaos]];
}

/**
 * Guarded writes issued since the last step each get a chance to freeze their worker right
 * before they run: the zombie then wakes to find its write (and every later one) rejected.
 */
export function zombieAtWrite(sim: Simulation): ActionPick | undefined {
  const fresh = sim.scheduler.eligibleOps().filter((op) => op.id > sim.lastOpSeen);
  if (fresh.length) sim.lastOpSeen = fresh.at(-1)!.id;
  for (const op of fresh) {
    const chance = freezeChance[op.label];
    if (chance === undefined || !sim.pick.chance(Math.min(0.9, chance * sim.profile.chaos))) continue;
    const holder = leaseHolders(sim).find((h) => h.worker.id === op.workerId &&
      (op.params?.[0] === undefined || op.params[0] === h.run.id));
    // One per run: each costs the run an attempt, and enough of them would salvage every run.
    if (!holder || sim.frozenRuns.has(holder.run.id)) continue;
    sim.frozenRuns.add(holder.run.id);
    return action('zombie', () => freeze(sim, holder, `right before ${op.label}`));
  }
  return undefined;
}

/** A zombie may wake once its run was claimed again or closed, or after its patience ran out. */
export function hasMovedOn(sim: Simulation, worker: SimWorker): boolean {
  const zombie = sim.zombies.get(worker.id);
  if (!zombie) return true;
  const run = sim.runs.find((r) => r.id === zombie.runId);
  return !run || run.fence > zombie.fence || isClosed(run.status) || sim.scheduler.nowMs >= zombie.untilMs;
}
