// The chaos harness's processes: real `agent-kit worker` processes it can SIGKILL, stop as a
// deploy does (SIGTERM), freeze (SIGSTOP past the lease, then SIGCONT) and respawn, plus short-lived extra `drain` and `reap`
// processes. Every child logs to its own file; the fleet remembers how each one ended.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = fileURLToPath(new URL('../..', import.meta.url));
const binPath = path.join(packageDir, 'bin', 'agent-kit.js');

export interface Child {
  slot: string;
  role: 'worker' | 'drain' | 'reap';
  proc: ChildProcess;
  pid: number;
  frozen: boolean;
  /** Set when we SIGKILLed it: its exit status is ours, not its. */
  killed: boolean;
  /** Set when we sent it SIGTERM (a deploy, or the end of the run). */
  terminated?: boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export class Fleet {
  readonly workers = new Map<string, Child>();
  /** Every worker ever started: the end of the run stops any still alive, in its slot or not. */
  private readonly everyWorker: Child[] = [];
  readonly helpers = new Set<Child>();
  /** Workers that exited on their own with a non-zero code (after SIGTERM or otherwise). */
  readonly badExits: string[] = [];
  private spawned = 0;

  constructor(
    private readonly env: NodeJS.ProcessEnv,
    private readonly logDir: string,
    private readonly workerArgs: string[],
  ) {}

  /** Set by stopAll: a respawn scheduled before it must not start a worker nobody stops. */
  private stopping = false;

  /**
   * Start (or restart) the worker in `slot`; nothing once the fleet is stopping, or while the
   * slot's worker still runs: a kill and a deploy of one worker each asked for its respawn, and
   * the second replaced the first's in the slot, leaving a worker that nobody stopped.
   */
  startWorker(slot: string): Child | undefined {
    if (this.stopping) return undefined;
    const current = this.workers.get(slot);
    if (current && current.proc.exitCode === null && current.proc.signalCode === null) return undefined;
    const child = this.spawnChild(slot, 'worker', ['worker', ...this.workerArgs]);
    this.workers.set(slot, child);
    this.everyWorker.push(child);
    void child.exited.then(({ code, signal }) => {
      if (child.killed || code === 0) return;
      // SIGTERM before the worker installed its handler (still loading: a deploy soon after a
      // respawn, or the end of the run) ends it by the default action; it held nothing yet, so
      // that is no breach of "SIGTERM → finish or park, exit 0".
      if (child.terminated && signal === 'SIGTERM' && !this.hasStarted(child)) return;
      this.badExits.push(`worker ${slot} (pid ${child.pid}) exited code=${code} signal=${signal}`);
    });
    return child;
  }

  /** Start a one-shot `drain` or `reap`; the fleet waits for it at the end. */
  startHelper(role: 'drain' | 'reap', args: string[]): Child | undefined {
    if (this.stopping) return undefined;
    const child = this.spawnChild(`${role}-${this.spawned}`, role, [role, ...args]);
    this.helpers.add(child);
    void child.exited.then(() => this.helpers.delete(child));
    return child;
  }

  /** SIGKILL a worker: no signal handler runs, nothing is flushed. */
  kill(child: Child): void {
    child.killed = true;
    if (child.frozen) child.frozen = false; // SIGKILL ends a stopped process too
    child.proc.kill('SIGKILL');
  }

  /**
   * A deploy: SIGTERM the worker (it must park or finish and exit 0, a model step cut after its
   * grace, ADR-0117), then start its slot again once it has exited.
   */
  deploy(child: Child): void {
    child.terminated = true;
    child.proc.kill('SIGTERM');
    void child.exited.then(() => this.startWorker(child.slot));
  }

  /** SIGSTOP for `ms`, then SIGCONT: the worker wakes as a zombie whose leases have moved on. */
  freeze(child: Child, ms: number): Promise<void> {
    child.frozen = true;
    child.proc.kill('SIGSTOP');
    return new Promise((resolve) => {
      setTimeout(() => {
        if (child.frozen) {
          child.frozen = false;
          child.proc.kill('SIGCONT');
        }
        resolve();
      }, ms);
    });
  }

  /** Live workers that are not frozen, nor on their way out after a deploy's SIGTERM. */
  liveWorkers(): Child[] {
    return [...this.workers.values()].filter((c) => !c.frozen && !c.killed && !c.terminated && c.proc.exitCode === null);
  }

  /** SIGTERM every worker and wait for all children; records workers that did not exit 0. */
  async stopAll(timeoutMs: number): Promise<void> {
    this.stopping = true;
    for (const child of this.everyWorker) {
      if (child.frozen) {
        child.frozen = false;
        child.proc.kill('SIGCONT');
      }
      if (!child.killed && child.proc.exitCode === null) {
        child.terminated = true;
        child.proc.kill('SIGTERM');
      }
    }
    const all = [...this.everyWorker, ...this.helpers];
    const deadline = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), timeoutMs).unref());
    for (const child of all) {
      if ((await Promise.race([child.exited, deadline])) === 'timeout') {
        this.badExits.push(`${child.role} ${child.slot} (pid ${child.pid}) did not exit within ${timeoutMs} ms of SIGTERM`);
        child.killed = true;
        child.proc.kill('SIGKILL');
      }
    }
  }

  /** Whether the worker logged that it started (its loops and signal handlers are up). */
  private hasStarted(child: Child): boolean {
    const log = fs.readFileSync(path.join(this.logDir, `${child.slot}.log`), 'utf8');
    return log.includes(`"pid":${child.pid},"msg":"worker: started"`);
  }

  private spawnChild(slot: string, role: Child['role'], args: string[]): Child {
    this.spawned++;
    const log = fs.openSync(path.join(this.logDir, `${slot}.log`), 'a');
    const proc = spawn(process.execPath, [binPath, ...args], { env: this.env, stdio: ['ignore', log, log] });
    fs.closeSync(log);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      proc.once('exit', (code, signal) => resolve({ code, signal }));
    });
    return { slot, role, proc, pid: proc.pid!, frozen: false, killed: false, exited };
  }
}
