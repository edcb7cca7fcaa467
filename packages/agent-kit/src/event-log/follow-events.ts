// Following a thread's event log live: replay from a cursor, then wait for more. One shared
// LISTEN per process and Db fans NOTIFYs out to viewers by thread, and this process's own commits
// wake them at once (event-hub.ts); a viewer reads its next page with `seq > cursor`,
// so a missed notify only delays it until the next poll, and a notify for an event it has already
// read is ignored. Memory stays bounded: a viewer holds at most one page and reads the next only
// when its consumer pulls.
import { coerceError, StoreUnavailableError } from '../errors.js';
import type { Db } from '../store/db.js';
import { hubFor, type EventHub } from './event-hub.js';
import {
  defaultEventPageSize, maxEventPageSize, readEvents, type ThreadEvent,
} from './read-events.js';

// The channel (and its payload, "threadId:<hint>") is the store's: see store/notify-thread.ts.
export { eventsChannel } from '../store/notify-thread.js';

// The poll is the safety net for a lost notification. Postgres delivers NOTIFY over a dedicated
// connection that can drop; PGlite delivers in-process, so its poll can be tight and cheap.
const defaultPollIntervalMs = { pg: 1_000, pglite: 250 } as const;
// A poll that finds events no notification announced means this process does not hear the
// writer's (LISTEN behind a transaction-mode pooler hears nothing): poll at the stream mirror's
// cadence (ADR-0010) while polls keep finding events, and back off to the interval when they stop.
// It reads about as often as a hearing LISTEN wakes it, one read per write (ADR-0032).
const unheardPollMs = 100;
// A follower that joins a thread written this recently (a reload or a second tab mid-answer)
// starts at that pace too, so that it need not wait a whole interval to find the stream. Where
// notifications arrive this costs a few empty polls while the interval backs off.
const liveThreadMs = 5_000;
// A read the database could not answer (a dropped connection, a restart, a failover) is tried
// again, a little later each time, for this long before the follower gives up (by default; the
// HTTP streams wait for as long as they last): a viewer's stream waits out an outage
// (keep-alives go on) instead of ending with an error while its turn goes on.
const defaultOutageWaitMs = 60_000;
const storeRetryMinMs = 250;
const storeRetryMaxMs = 2_000;

export interface FollowEventsOptions {
  threadId: string;
  /** Start after this seq (0 = the whole log). */
  afterSeq?: number;
  /**
   * Events per read; the viewer holds at most one page. By default the first read takes
   * defaultEventPageSize (a quick first page) and, while pages come back full (catching up on a
   * long log), the next ones take maxEventPageSize, so a replay costs few round trips.
   */
  pageSize?: number;
  /**
   * How long to wait for a notify before reading anyway (default 1 s on pg, 250 ms on PGlite).
   * While these polls find events no notification announced, the wait is 100 ms (ADR-0032).
   */
  pollIntervalMs?: number;
  /** Stop following: the iterator ends (done) at its next step. */
  signal?: AbortSignal;
  /** End after yielding the first event for which this returns true (e.g. the run closed). */
  until?: (event: ThreadEvent) => boolean;
  /** How long a read the database does not answer is tried again before it throws (default 60 s). */
  outageWaitMs?: number;
}

/** A live, pull-driven view of a thread's log. `close()` (or `return()`) releases it at once. */
export interface EventFollower extends AsyncIterableIterator<ThreadEvent> {
  /** The seq of the last event yielded (the resume cursor). */
  readonly cursor: number;
  /**
   * The next event of the page already read, without reading or waiting; undefined when the
   * next event needs a read or a wait (then call `next()`). It moves the cursor and honours
   * `until` exactly as `next()` does, so the two may be mixed.
   */
  nextBuffered(): ThreadEvent | undefined;
  close(): void;
}

/**
 * Replay a thread's events after `afterSeq`, then follow new ones as they are appended, in seq
 * order with no gaps. Nothing is read ahead of the consumer: a slow consumer slows the reads.
 * @throws InvalidArgumentError (from the first read) for a bad cursor or page size.
 */
export function followEvents(db: Db, options: FollowEventsOptions): EventFollower {
  return new Follower(db, options);
}

class Follower implements EventFollower {
  cursor: number;
  private page: ThreadEvent[] = [];
  private index = 0;
  private closed = false;
  private readonly hub: EventHub;
  private readonly subscription: ReturnType<EventHub['subscribe']>;
  private readonly pageSize: number | undefined;
  /** Set while pages come back full: the follower is behind the log's end. */
  private isCatchingUp = false;
  private readonly yieldsBeforeRead: boolean;
  private readonly pollIntervalMs: number;
  /** The next wait's timeout: pollIntervalMs, or shorter while polls find unannounced events. */
  private pollMs: number;
  /** What ended the last wait: its timeout, or a wake (a notification, this process's commit). */
  private waitedFor: 'poll' | 'wake' | undefined;
  /** A read has returned the log's end (a page that was not full). */
  private reachedEnd = false;
  /** When the newest event read so far was written (its transaction's start, by the database). */
  private newestAt: Date | undefined;
  /**
   * The last read returned the log's end while LISTEN was in place: a later event wakes the
   * viewer, so the next read waits for that instead of reading an empty page first.
   */
  private atEnd = false;
  private readonly onAbort = () => this.close();
  /** Ends a wait between two reads of a database that did not answer (set while one waits). */
  private endPause: (() => void) | undefined;

  constructor(private readonly db: Db, private readonly options: FollowEventsOptions) {
    this.cursor = options.afterSeq ?? 0;
    this.pageSize = options.pageSize;
    this.yieldsBeforeRead = db.kind === 'pglite';
    this.pollIntervalMs = options.pollIntervalMs ?? defaultPollIntervalMs[db.kind];
    this.pollMs = this.pollIntervalMs;
    this.hub = hubFor(db);
    // A wake for an event already in the page held is no reason to read again.
    this.subscription = this.hub.subscribe(options.threadId, () => Math.max(this.cursor, this.page.at(-1)?.seq ?? 0));
    if (options.signal?.aborted) this.close();
    else options.signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  async next(): Promise<IteratorResult<ThreadEvent, undefined>> {
    while (!this.closed) {
      const event = this.nextBuffered();
      if (event) return { value: event, done: false };
      await this.readPage();
    }
    return { value: undefined, done: true };
  }

  nextBuffered(): ThreadEvent | undefined {
    // A read that was in flight when the follower closed may still fill the page: ignore it.
    const event = this.closed ? undefined : this.page[this.index];
    if (!event) return undefined;
    this.index++;
    this.cursor = event.seq;
    if (this.options.until?.(event)) this.close();
    return event;
  }

  /**
   * Read the page after the cursor; when it is empty, wait for a notify or the poll. After a
   * page that reached the log's end, wait first: one read per wake, not a second, empty one.
   */
  private async readPage(): Promise<void> {
    this.page = [];
    this.index = 0;
    if (this.atEnd) {
      this.atEnd = false;
      await this.waitForNotify();
    }
    if (this.yieldsBeforeRead) await this.hub.yieldTurn();
    if (this.closed) return;
    const { waiter, channel } = this.subscription;
    waiter.dirty = false; // a notify from here on means "read again", even mid-read
    const limit = this.pageSize ?? (this.isCatchingUp ? maxEventPageSize : defaultEventPageSize);
    const listened = this.hub.listens;
    try {
      const { threadId } = this.options;
      const cursor = this.cursor;
      this.page = await this.throughOutage(() => this.hub.readShared(threadId, channel, cursor, limit));
    } catch (raw) {
      if (this.closed) return; // closed while it waited for the database: nobody to tell
      this.close();
      throw coerceError(raw);
    }
    if (this.closed) return;
    this.isCatchingUp = this.page.length === limit;
    this.atEnd = listened && this.page.length > 0 && !this.isCatchingUp;
    this.newestAt = this.page.at(-1)?.createdAt ?? this.newestAt;
    const cause = this.waitedFor;
    this.waitedFor = undefined;
    if (cause === 'poll') this.adaptPoll(this.page.length > 0);
    // A wake brought events: this viewer hears its writer and needs no quick poll.
    else if (cause === 'wake' && this.page.length > 0) this.pollMs = this.pollIntervalMs;
    else if (!this.reachedEnd && !this.isCatchingUp) await this.joined();
    if (this.page.length === 0 && !this.closed) await this.waitForNotify();
  }

  /** The first read that reached the log's end: was the thread written moments ago? */
  private async joined() {
    this.reachedEnd = true;
    if (!this.newestAt && this.cursor > 0) {
      // Resumed at the log's end (an EventSource reconnecting after its response was cut): the
      // page was empty, so ask when the event the viewer holds was written.
      try {
        const [held] = await this.throughOutage(() => readEvents(this.db, { threadId: this.options.threadId, afterSeq: this.cursor - 1, limit: 1 }));
        this.newestAt = held?.createdAt;
      } catch (raw) {
        if (this.closed) return;
        this.close();
        throw coerceError(raw);
      }
    }
    const age = this.newestAt ? Date.now() - this.newestAt.getTime() : Infinity;
    if (age < liveThreadMs) this.pollMs = Math.min(unheardPollMs, this.pollIntervalMs);
  }

  /**
   * `read`, tried again while the database is unavailable (StoreUnavailableError), for up to
   * outageWaitMs; any other error, or one past that, is thrown. A close ends the wait.
   */
  private async throughOutage<T>(read: () => Promise<T>): Promise<T> {
    const giveUpAt = Date.now() + (this.options.outageWaitMs ?? defaultOutageWaitMs);
    for (let tries = 0; ; tries++) {
      try {
        return await read();
      } catch (raw) {
        const error = coerceError(raw);
        if (!(error instanceof StoreUnavailableError) || this.closed || Date.now() >= giveUpAt) throw error;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.min(storeRetryMaxMs, storeRetryMinMs * 2 ** tries));
          this.endPause = done;
          function done() {
            clearTimeout(timer);
            resolve();
          }
        });
        this.endPause = undefined;
        if (this.closed) throw error;
      }
    }
  }

  /** After a read its poll started: did it find what no notification had announced? */
  private adaptPoll(foundUnannounced: boolean) {
    this.pollMs = foundUnannounced
      ? Math.min(unheardPollMs, this.pollIntervalMs)
      : Math.min(this.pollMs * 2, this.pollIntervalMs);
  }

  /** Resolve on a notify for this thread, after the poll interval, or on close. */
  private waitForNotify(): Promise<void> {
    const { waiter } = this.subscription;
    this.waitedFor = 'wake';
    if (waiter.dirty) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waitedFor = 'poll';
        done();
      }, this.pollMs);
      function done() {
        clearTimeout(timer);
        waiter.wake = undefined;
        resolve();
      }
      waiter.wake = done;
    });
  }

  async return(): Promise<IteratorResult<ThreadEvent, undefined>> {
    this.close();
    return { value: undefined, done: true };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.page = [];
    this.options.signal?.removeEventListener('abort', this.onAbort);
    this.subscription.waiter.wake?.();
    this.endPause?.();
    this.subscription.unsubscribe();
  }
}
