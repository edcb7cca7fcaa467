// Virtual time for simulated workers. Inside a worker's async context (AsyncLocalStorage),
// setTimeout/setInterval/Date.now/performance.now are served by the simulation's clock, so a
// timer fires only when the scheduler advances time and every deadline, renewal tick, mirror batch
// and token pause happens at a reproducible instant. Math.random is the schedule's seeded stream
// there too: the engine's jitter (a model retry's backoff, a failing drain's) sets timers. Outside
// any worker (the scheduler, PGlite, vitest) the real functions run untouched. See ADR-0018 and
// ADR-0085.
import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';

export interface WorkerContext {
  workerId: number;
}

interface VirtualTimer {
  id: number;
  dueMs: number;
  /** Set for setInterval: the timer is re-armed after each firing. */
  intervalMs: number | null;
  callback: () => void;
  workerId: number;
  active: boolean;
}

/** What setTimeout returns inside a worker: enough of Node's Timeout for the code we run. */
class VirtualTimeout {
  constructor(
    readonly timer: VirtualTimer,
    private readonly clock: VirtualClock,
  ) {}
  ref() {
    return this;
  }
  unref() {
    return this;
  }
  hasRef() {
    return true;
  }
  refresh() {
    this.clock.rearm(this.timer);
    return this;
  }
  [Symbol.toPrimitive]() {
    return this.timer.id;
  }
}

const storage = new AsyncLocalStorage<WorkerContext>();

/** The simulation's clock and its pending timers, per worker. */
export class VirtualClock {
  private readonly timers = new Map<number, VirtualTimer>();
  private nextTimerId = 1;
  /** Bumped whenever a timer is added or cleared: the scheduler's "something happened" signal. */
  activity = 0;

  /** `random`: the seeded stream Math.random reads in a worker. */
  constructor(
    public nowMs: number,
    readonly random: () => number,
  ) {}

  add(workerId: number, delay: unknown, callback: () => void, repeat: boolean): VirtualTimer {
    // Node's rule: a delay that is not a number in [1, 2^31 - 1] becomes 1 ms.
    let delayMs = Math.trunc(Number(delay));
    if (!(delayMs >= 1 && delayMs <= 2_147_483_647)) delayMs = 1;
    const timer: VirtualTimer = {
      id: this.nextTimerId++, dueMs: this.nowMs + delayMs, intervalMs: repeat ? delayMs : null,
      callback, workerId, active: true,
    };
    this.timers.set(timer.id, timer);
    this.activity++;
    return timer;
  }

  clear(timer: VirtualTimer): void {
    timer.active = false;
    if (this.timers.delete(timer.id)) this.activity++;
  }

  rearm(timer: VirtualTimer): void {
    const delayMs = timer.intervalMs ?? Math.max(1, timer.dueMs - this.nowMs);
    timer.dueMs = this.nowMs + delayMs;
    if (timer.active) this.timers.set(timer.id, timer);
    this.activity++;
  }

  /** A dead process has no timers. */
  dropWorker(workerId: number): void {
    for (const timer of [...this.timers.values()]) if (timer.workerId === workerId) this.clear(timer);
  }

  /** The earliest timer of a worker that may run, ties broken by creation order. */
  nextDue(isEligible: (workerId: number) => boolean): VirtualTimer | undefined {
    let best: VirtualTimer | undefined;
    for (const timer of this.timers.values()) {
      if (!isEligible(timer.workerId)) continue;
      if (!best || timer.dueMs < best.dueMs || (timer.dueMs === best.dueMs && timer.id < best.id)) best = timer;
    }
    return best;
  }

  pendingFor(workerId: number): number {
    let count = 0;
    for (const timer of this.timers.values()) if (timer.workerId === workerId) count++;
    return count;
  }

  /** Run a due timer's callback in its worker's context (re-arming an interval first). */
  fire(timer: VirtualTimer): void {
    if (!timer.active) return;
    if (timer.intervalMs !== null) {
      // Like Node: the next tick counts from now, so a stopped process does not catch up on ticks.
      timer.dueMs = this.nowMs + timer.intervalMs;
    } else {
      this.timers.delete(timer.id);
      timer.active = false;
    }
    this.activity++;
    timer.callback();
  }
}

const real = {
  setTimeout: globalThis.setTimeout,
  clearTimeout: globalThis.clearTimeout,
  setInterval: globalThis.setInterval,
  clearInterval: globalThis.clearInterval,
  dateNow: Date.now,
  performanceNow: performance.now.bind(performance),
  setImmediate: globalThis.setImmediate,
  random: Math.random,
};

let activeClock: VirtualClock | undefined;

function schedule(repeat: boolean, callback: unknown, delay: unknown, args: unknown[]) {
  const context = storage.getStore();
  if (!activeClock || !context) {
    const fn = repeat ? real.setInterval : real.setTimeout;
    return (fn as (...a: unknown[]) => unknown)(callback, delay, ...args);
  }
  if (typeof callback !== 'function') throw new TypeError('The "callback" argument must be a function');
  // Bind to the creating context, so the callback (and the timers it sets) stay in the worker.
  const bound = AsyncResource.bind(() => (callback as (...a: unknown[]) => void)(...args));
  return new VirtualTimeout(activeClock.add(context.workerId, delay, bound, repeat), activeClock);
}

function cancel(handle: unknown, realFn: (h: never) => void) {
  if (handle instanceof VirtualTimeout) {
    activeClock?.clear(handle.timer);
    return;
  }
  realFn(handle as never);
}

/** Serve timers, clocks and Math.random from `clock` inside worker contexts until uninstallVirtualTime(). */
export function installVirtualTime(clock: VirtualClock): void {
  if (activeClock) throw new Error('virtual time is already installed (one simulation per process at a time)');
  activeClock = clock;
  const g = globalThis as Record<string, unknown>;
  g.setTimeout = (callback: unknown, delay?: unknown, ...args: unknown[]) => schedule(false, callback, delay, args);
  g.setInterval = (callback: unknown, delay?: unknown, ...args: unknown[]) => schedule(true, callback, delay, args);
  g.clearTimeout = (handle: unknown) => cancel(handle, real.clearTimeout as (h: never) => void);
  g.clearInterval = (handle: unknown) => cancel(handle, real.clearInterval as (h: never) => void);
  Date.now = () => (storage.getStore() && activeClock ? activeClock.nowMs : real.dateNow());
  // performance.now counts from an arbitrary origin; in a worker it counts virtual ms.
  performance.now = () => (storage.getStore() && activeClock ? activeClock.nowMs - 1.7e12 : real.performanceNow());
  Math.random = () => (storage.getStore() && activeClock ? activeClock.random() : real.random());
}

export function uninstallVirtualTime(): void {
  const g = globalThis as Record<string, unknown>;
  g.setTimeout = real.setTimeout;
  g.setInterval = real.setInterval;
  g.clearTimeout = real.clearTimeout;
  g.clearInterval = real.clearInterval;
  Date.now = real.dateNow;
  Math.random = real.random;
  delete (performance as unknown as Record<string, unknown>).now;
  activeClock = undefined;
}

/** Run `fn` as worker `workerId`: its timers and clock reads are virtual from here on. */
export function runInWorker<T>(workerId: number, fn: () => T): T {
  return storage.run({ workerId }, fn);
}

/** Run `fn` outside every worker (real timers): used for the real database calls. */
export function outsideWorkers<T>(fn: () => T): T {
  return storage.exit(fn);
}

/** The worker whose code is running now, if any. */
export function currentWorkerId(): number | undefined {
  return storage.getStore()?.workerId;
}

/** One real macrotask turn: every microtask queued before it has run. */
export function realTick(): Promise<void> {
  return new Promise((resolve) => real.setImmediate(resolve));
}
