// A wake-up latch for the worker's loops: NOTIFY pokes it, a loop waits on it with a timeout.
// A poke that arrives while nobody waits is remembered, so a job enqueued between a loop's last
// look and its next wait is never slept through (no lost wake-up).

export class Waker {
  private poked = false;
  private waiters = new Set<() => void>();

  /** Wake every waiting loop now (or the next one to wait). */
  poke(): void {
    if (this.waiters.size === 0) {
      this.poked = true;
      return;
    }
    for (const wake of [...this.waiters]) wake();
  }

  /** Resolve on the next poke, after `timeoutMs`, or when `signal` aborts; never rejects. */
  wait(timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (this.poked || signal.aborted || timeoutMs <= 0) {
      this.poked = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(done);
    });
  }
}
