// The stream mirror: text deltas are batched by time into guarded writes of the partial output
// + heartbeat + a text-delta event, one write in flight at a time, so database writes per run
// stay at or below 1000/intervalMs per second whatever the token rate. A rejected write stops it.
// What the model thinks goes the same way, as reasoning-delta events ahead of the text that
// followed it (ADR-0070); it is never part of the partial output.
import { assert, coerceError } from '../errors.js';
import { mirrorPartial, mirrorReasoning, type Lease } from '../lease/lease.js';
import type { Queryable } from '../store/db.js';

export type MirrorStop = 'lost' | 'cancel' | 'takeover' | 'store-error';

/** What one write sends: reasoning first, then the reply's text that came after it. */
interface Batch {
  reasoning: string;
  text: string;
}

export class StreamMirror {
  /**
   * Unwritten batches in the order the model sent them; a batch ends where reasoning follows
   * text, so only the first can be text alone. Each write takes the first.
   */
  private pending: Batch[] = [];
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  /**
   * When the last mirror write returned; 0 before a step's first one, so that batch goes out at
   * once (after the current turn of the event loop) and a fast model's first token is not held
   * back (ADR-0034). Later batches keep their interval.
   */
  private lastWriteAt = 0;
  /** Why the mirror stopped writing, if it did. */
  stopped: MirrorStop | undefined;
  stopError: Error | undefined;
  /** Text that reached the database (the run's partial, past the segment's starting text). */
  writtenText = '';
  writes = 0;

  constructor(
    private readonly db: Queryable,
    private readonly lease: Lease,
    private readonly intervalMs: number,
    private readonly onStop: (reason: MirrorStop) => void,
  ) {}

  /** Queue text of the reply for the next batched write. Ignored once stopped. */
  push(text: string): void {
    if (this.stopped || !text) return;
    const last = this.pending.at(-1);
    if (last) last.text += text;
    else this.pending.push({ reasoning: '', text });
    this.schedule();
  }

  /** Queue what the model thinks for the next batched write (ADR-0070). Ignored once stopped. */
  pushReasoning(text: string): void {
    if (this.stopped || !text) return;
    const last = this.pending.at(-1);
    if (last && last.text === '') last.reasoning += text;
    else this.pending.push({ reasoning: text, text: '' });
    this.schedule();
  }

  private schedule() {
    if (this.timer || this.inFlight || this.stopped) return;
    const waitMs = Math.max(0, this.lastWriteAt + this.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.write();
    }, waitMs);
  }

  private async write(): Promise<void> {
    if (this.stopped || this.inFlight) return;
    const batch = this.pending.shift();
    if (!batch) return;
    this.inFlight = (async () => {
      try {
        const result = batch.reasoning
          ? await mirrorReasoning(this.db, this.lease, batch.reasoning, batch.text)
          : await mirrorPartial(this.db, this.lease, batch.text);
        this.writes++;
        if (!result.ok) return this.stop('lost');
        this.writtenText += batch.text;
        if (result.interrupt) this.stop(result.interrupt);
      } catch (raw) {
        this.stopError = coerceError(raw);
        this.stop('store-error');
      }
    })();
    await this.inFlight;
    this.inFlight = undefined;
    this.lastWriteAt = Date.now();
    if (this.pending.length > 0) this.schedule();
  }

  private stop(reason: MirrorStop) {
    if (this.stopped) return;
    this.stopped = reason;
    // A cancel or takeover leaves the lease held: the step the model has finished may still be
    // committed with the text not yet written (takeForCommit). A lost lease or a store error leaves nothing to write.
    if (reason !== 'cancel' && reason !== 'takeover') this.pending = [];
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.onStop(reason);
  }

  /** Write what is buffered now and wait for it. Returns the stop reason, if any. */
  async flush(): Promise<MirrorStop | undefined> {
    await this.writeOut(() => this.pending.length > 0);
    return this.stopped;
  }

  /** Write batches now, one after another, while `more()` says so and the mirror has not stopped. */
  private async writeOut(more: () => boolean): Promise<void> {
    await this.settle();
    while (!this.stopped && more()) {
      await this.write();
      await this.settle(); // the write scheduled what is left: it goes now
    }
  }

  /** Cancel the scheduled write and wait for the one in flight. */
  private async settle(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.inFlight) await this.inFlight;
  }

  /**
   * Hand the unwritten text to the caller, who writes it with the step it ends (one statement
   * instead of a mirror write and a step record). Waits for a write in flight first, and writes
   * unwritten reasoning (with the text before it) first, as the step record holds no reasoning
   * event; returns the stop reason instead when the mirror stopped. A cancel or takeover seen by
   * the last write, with only text left unwritten, still hands that text over, with the
   * interrupt: the step is committed under the lease the segment still holds, and then honoured.
   * Call `written(delta)` once that committed.
   */
  async takeForCommit(): Promise<{ stopped: MirrorStop } | { delta: string; interrupt?: 'cancel' | 'takeover' }> {
    await this.writeOut(() => this.pending.some((batch) => batch.reasoning !== ''));
    const interrupt = this.stopped === 'cancel' || this.stopped === 'takeover' ? this.stopped : undefined;
    // Stopped otherwise, or by an interrupt with reasoning left that only a mirror write carries.
    if (this.stopped && (!interrupt || this.pending.some((batch) => batch.reasoning !== ''))) return { stopped: this.stopped };
    // Left: at most the first batch, text alone.
    const delta = this.pending.shift()?.text ?? '';
    assert(this.pending.length === 0, 'only text is left for the step to commit');
    return interrupt ? { delta, interrupt } : { delta };
  }

  /** Text taken with takeForCommit reached the database. */
  written(delta: string): void {
    this.writtenText += delta;
    this.lastWriteAt = 0; // the next step's first text goes out at once
  }

  /**
   * The run's partial was set anew, to the start of a step asked again (ADR-0061): nothing past
   * it is written yet. Call after `flush`, with no write pending.
   */
  rebase(): void {
    assert(this.pending.length === 0 && !this.inFlight && !this.timer, 'a mirror is rebased with nothing pending');
    this.writtenText = '';
    this.lastWriteAt = 0; // the retry's first text goes out at once
  }

  /** Stop scheduling writes (the segment is over). */
  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = [];
  }
}
