// `agent-kit events THREAD_ID [--follow] [--after N | --turns N]`: a thread's event log as JSON
// lines (the same shape as the SSE `data:`), from a cursor or from the start of its latest N
// turns (ADR-0049); with --follow it keeps printing live events until SIGINT/SIGTERM. Output
// waits for stdout to drain, so a slow pipe never piles events up.
import { type Command, CommanderError } from 'commander';
import { InvalidArgumentError, NotFoundError } from '../../errors.js';
import type { Db } from '../../store/db.js';
import { uuidArgument, withDb } from '../main.js';
import { stopOnSignals } from './with-runtime.js';

export interface EventsOptions {
  follow?: boolean;
  after?: number;
  /** Start at the first event of the thread's latest N turns (and any older turn still open). */
  turns?: number;
}

function wholeNumber(flag: string, min: number) {
  return (value: string) => {
    if (!/^\d{1,15}$/.test(value) || Number(value) < min) {
      const what = min === 0 ? 'a non-negative integer' : `a whole number of at least ${min}`;
      throw new CommanderError(2, 'agent-kit.invalidArgument', `${flag} takes ${what}, got "${value}"`);
    }
    return Number(value);
  };
}

export function register(program: Command) {
  program
    .command('events')
    .description("print a thread's events as JSON lines; --follow keeps printing live events until Ctrl-C")
    .argument('<thread-id>', 'the thread id (a uuid)', uuidArgument('THREAD_ID'))
    .option('--follow', 'keep following new events until interrupted')
    .option('--after <seq>', 'start after this seq (default 0: the whole log)', wholeNumber('--after', 0))
    .option('--turns <n>', "start at the first event of the thread's latest n turns (not with --after)", wholeNumber('--turns', 1))
    .action(async (threadId: string, options: EventsOptions) => {
      if (options.after !== undefined && options.turns !== undefined) {
        throw new CommanderError(2, 'agent-kit.invalidArgument', 'use --after or --turns, not both');
      }
      const stopping = stopOnSignals();
      try {
        await withDb((db) => printEvents(db, threadId, options, writeStdout, stopping.signal));
      } finally {
        stopping.dispose();
      }
    });
}

/** Write to stdout, resolving when it can take more (backpressure for pipes). */
function writeStdout(line: string): Promise<void> {
  if (process.stdout.write(line)) return Promise.resolve();
  return new Promise((resolve) => process.stdout.once('drain', resolve));
}

/**
 * Print the events after `options.after` (or from the start of the latest `options.turns` turns)
 * as JSON lines; with `follow`, keep going until `signal`.
 * @throws NotFoundError when there is no such thread.
 */
export async function printEvents(
  db: Db,
  threadId: string,
  options: EventsOptions,
  write: (line: string) => Promise<void>,
  signal?: AbortSignal,
): Promise<number> {
  const [
    { followEvents }, { readEvents, toEventJson, maxEventPageSize }, { readThreadHead }, { readTurnWindow },
  ] = await Promise.all([
    import('../../event-log/follow-events.js'), import('../../event-log/read-events.js'),
    import('../../event-log/read-threads.js'), import('../../event-log/turn-window.js'),
  ]);
  const head = await readThreadHead(db, threadId);
  if (head === null) throw new NotFoundError(`thread ${threadId} not found`);
  const after = options.turns === undefined
    ? options.after ?? 0
    : (await readTurnWindow(db, threadId, { turns: options.turns })).window.fromSeq - 1;
  const { lastSeq } = head;
  if (after > lastSeq) {
    // (Else it printed nothing and exited 0, or, following, waited for the log to reach it.)
    throw new InvalidArgumentError(`--after ${after} is past the thread's last event (seq ${lastSeq})`);
  }
  let printed = 0;
  if (options.follow) {
    for await (const event of followEvents(db, { threadId, afterSeq: after, signal })) {
      await write(`${JSON.stringify(toEventJson(event))}\n`);
      printed++;
    }
    return printed;
  }
  // Without --follow: page through what is there now and stop.
  let cursor = after;
  for (;;) {
    const page = await readEvents(db, { threadId, afterSeq: cursor, limit: maxEventPageSize });
    for (const event of page) await write(`${JSON.stringify(toEventJson(event))}\n`);
    printed += page.length;
    if (page.length < maxEventPageSize || signal?.aborted) return printed;
    cursor = page[page.length - 1]!.seq;
  }
}
