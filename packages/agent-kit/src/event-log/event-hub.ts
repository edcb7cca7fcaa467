// The per-process fan-out behind followEvents: one LISTEN per process and Db, woken by NOTIFYs
// and by this process's own commits (onLocalNotify, ADR-0031), handing wakes to viewers by thread
// and sharing reads among viewers at the same cursor. It listens while viewers follow and for a
// linger after the last leaves (ADR-0033).
import { coerceError } from '../errors.js';
import type { Db } from '../store/db.js';
import { eventsChannel, onLocalNotify } from '../store/notify-thread.js';
import { readEvents, type ThreadEvent } from './read-events.js';

/**
 * After its last viewer leaves, a process keeps listening this long, as long as an idle pooled
 * connection lives (pg-driver): a process serving one chat at a time would otherwise open a LISTEN
 * connection per chat, and starting a Postgres backend costs more server CPU (4.5 ms measured
 * here) than a turn's own statements (ADR-0033). Tests shorten it.
 */
export const hubTiming = { listenLingerMs: 10_000 };

export interface Waiter {
  /** Set when a notify arrived since the viewer last read; a read clears it first. */
  dirty: boolean;
  wake: (() => void) | undefined;
  /** The last seq the viewer has read (consumed, or in the page it holds). */
  cursor: () => number;
}

export interface ThreadChannel {
  waiters: Set<Waiter>;
  /** Counts notifies for this thread; a shared read is reusable only within one generation. */
  generation: number;
  /** Reads in flight by "cursor:limit:generation": viewers at the same cursor share one query. */
  reads: Map<string, Promise<ThreadEvent[]>>;
}

/**
 * The per-process fan-out for one Db. It listens while at least one viewer follows and stops
 * listenLingerMs after the last leaves; viewers at the same cursor share a read, so N live viewers of a thread
 * cost one query per wake, not N.
 */
export class EventHub {
  private readonly threads = new Map<string, ThreadChannel>();
  private viewers = 0;
  private listening: Promise<(() => Promise<void>) | undefined> | undefined;
  /**
   * LISTEN was asked for and did not fail: a commit after this moment reaches the viewers, by
   * its notification or, if the listener was not yet (or no longer) connected, by the wake of
   * every thread the Db sends once it listens again (Db.listen). Where a pooler swallows
   * notifications, the poll finds the event.
   */
  listens = false;
  private stopLocal: (() => void) | undefined;
  /** Armed while no viewer follows and LISTEN lingers; fires stopListening. */
  private lingering: NodeJS.Timeout | undefined;
  private turn: Promise<void> | undefined;

  constructor(private readonly db: Db) {}

  /**
   * Let the event loop run its timers and I/O once. A PGlite query runs in this thread and
   * resolves without returning to the event loop (measured: fifty in a row and no setImmediate
   * or setTimeout(0) callback ran), so a replay reading page after page would starve every socket
   * in the process, its own client's included, until a write blocks. The turn is shared: viewers
   * woken together resume together and still share their read (Node runs microtasks between
   * two setImmediate callbacks, so one turn each would split them).
   */
  yieldTurn(): Promise<void> {
    this.turn ??= new Promise((resolve) => setImmediate(() => {
      this.turn = undefined;
      resolve();
    }));
    return this.turn;
  }

  subscribe(threadId: string, cursor: () => number): { waiter: Waiter; channel: ThreadChannel; unsubscribe: () => void } {
    let channel = this.threads.get(threadId);
    if (!channel) {
      channel = { waiters: new Set(), generation: 0, reads: new Map() };
      this.threads.set(threadId, channel);
    }
    const waiter: Waiter = { dirty: false, wake: undefined, cursor };
    channel.waiters.add(waiter);
    if (this.viewers++ === 0) {
      if (this.lingering) clearTimeout(this.lingering);
      else this.startListening();
      this.lingering = undefined;
    }
    const owned = channel;
    let done = false;
    return {
      waiter,
      channel: owned,
      unsubscribe: () => {
        if (done) return;
        done = true;
        owned.waiters.delete(waiter);
        if (owned.waiters.size === 0 && owned.reads.size === 0) this.threads.delete(threadId);
        if (--this.viewers === 0) this.linger();
      },
    };
  }

  /** Read a page, sharing one query among viewers at the same cursor in the same generation. */
  readShared(
    threadId: string, channel: ThreadChannel, afterSeq: number, limit: number,
  ): Promise<ThreadEvent[]> {
    const key = `${afterSeq}:${limit}:${channel.generation}`;
    let read = channel.reads.get(key);
    if (!read) {
      read = readEvents(this.db, { threadId, afterSeq, limit }).finally(() => {
        channel.reads.delete(key);
        const idle = channel.waiters.size === 0 && channel.reads.size === 0;
        if (idle && this.threads.get(threadId) === channel) {
          this.threads.delete(threadId);
        }
      });
      channel.reads.set(key, read);
    }
    return read;
  }

  /** A NOTIFY payload "threadId:seq" (seq 0: unknown), or "" for "you may have missed some". */
  private onNotify(payload: string) {
    const colon = payload.indexOf(':');
    if (colon < 0) return this.wake(payload, 0);
    this.wake(payload.slice(0, colon), Number(payload.slice(colon + 1)) || 0);
  }

  /** Wake the viewers of `threadId` (all threads when empty) that have not read `seq` yet. */
  private wake(threadId: string, seq: number) {
    const targets = threadId ? [this.threads.get(threadId)] : [...this.threads.values()];
    for (const channel of targets) {
      if (!channel) continue;
      channel.generation++;
      for (const waiter of channel.waiters) {
        // Already read (woken by this process's commit, or by its poll): no need to read again.
        if (seq > 0 && waiter.cursor() >= seq) continue;
        waiter.dirty = true;
        waiter.wake?.();
      }
    }
  }

  private startListening() {
    this.stopLocal = onLocalNotify((threadId, seq) => this.wake(threadId, seq));
    const pending = this.db.listen(eventsChannel, (payload) => this.onNotify(payload)).catch((raw) => {
      // Without LISTEN (a pooler, a lost server) viewers still progress by polling.
      void coerceError(raw);
      return undefined;
    });
    this.listening = pending;
    void pending.then((unlisten) => {
      if (unlisten && this.listening === pending) this.listens = true;
    });
  }

  /** Stop listening unless a viewer comes within the linger; the timer keeps no process alive. */
  private linger() {
    this.lingering = setTimeout(() => {
      this.lingering = undefined;
      this.stopListening();
    }, hubTiming.listenLingerMs);
    this.lingering.unref();
  }

  private stopListening() {
    this.stopLocal?.();
    this.stopLocal = undefined;
    const pending = this.listening;
    this.listening = undefined;
    this.listens = false;
    void pending?.then((unlisten) => unlisten?.()).catch(() => {});
  }
}

const hubs = new WeakMap<Db, EventHub>();

/** The hub of `db` in this process, made on first use. */
export function hubFor(db: Db): EventHub {
  let hub = hubs.get(db);
  if (!hub) {
    hub = new EventHub(db);
    hubs.set(db, hub);
  }
  return hub;
}
