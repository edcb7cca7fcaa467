// `agent-kit runs [--json] [--thread T] [--status S] [--in-doubt] [--limit N] [--before RUN]`: the
// run list an operator reads, newest first, with who holds each lease, its fence and attempts, its
// lease expiry, its effect count and how many of those are in doubt; --thread lists one thread's
// runs (the thread a user reports, from its address), --in-doubt only runs with some. --before
// RUN lists the runs after RUN in that order: the next page. A table for people, ending with the
// command for the next page when there is one; --json prints the same rows as one JSON array for
// scripts (the last row's id is the next page's --before).
import { type Command, CommanderError } from 'commander';
// Loaded at startup (SQL text only, no driver): --limit's bound is checked before the action.
import { listRunsPage, maxRunListSize, type RunSummary } from '../../event-log/read-runs.js';
import { runStatuses } from '../../lease/run-row.js';
import { uuidPattern, type Queryable } from '../../store/db.js';
import { withDb } from '../main.js';

export interface RunsOptions {
  json?: boolean;
  status?: string;
  /** Only runs with at least one effect in doubt. */
  inDoubt?: boolean;
  /** A thread id: only its runs. */
  thread?: string;
  limit?: number;
  /** A run id: list the runs after it (the next page). */
  before?: string;
}

export function register(program: Command) {
  program
    .command('runs')
    .description('list runs, newest first: status, lease holder, fence, attempts, lease expiry, effects, in doubt')
    .option('--json', 'print one JSON array instead of a table')
    .option('--status <status>', `only runs with this status (${runStatuses.join(', ')})`, (value) => {
      if (!(runStatuses as readonly string[]).includes(value)) {
        throw new CommanderError(2, 'agent-kit.invalidArgument',
          `--status takes one of ${runStatuses.join(', ')}, got "${value}"`);
      }
      return value;
    })
    .option('--thread <thread>', "only this thread's runs", (value) => {
      if (!uuidPattern.test(value)) {
        throw new CommanderError(2, 'agent-kit.invalidArgument', `--thread takes a thread id, got "${value}"`);
      }
      return value;
    })
    .option('--in-doubt', 'only runs with at least one effect in doubt')
    .option('--limit <n>', `at most this many runs (1..${maxRunListSize}, default 50)`, (value) => {
      const n = Number(value);
      if (!/^\d+$/.test(value) || n < 1 || n > maxRunListSize) {
        throw new CommanderError(2, 'agent-kit.invalidArgument',
          `--limit takes an integer 1..${maxRunListSize}, got "${value}"`);
      }
      return n;
    })
    .option('--before <run>', 'only the runs listed after this run (the next page)', (value) => {
      if (!uuidPattern.test(value)) {
        throw new CommanderError(2, 'agent-kit.invalidArgument', `--before takes a run id, got "${value}"`);
      }
      return value;
    })
    .action(async (options: RunsOptions) => {
      const text = await withDb((db) => formatRunsCommand(db, options, new Date()));
      process.stdout.write(text);
    });
}

/** The command's whole output, for a store and a "now" (tests pass both). */
export async function formatRunsCommand(db: Queryable, options: RunsOptions, now: Date): Promise<string> {
  const { runs, next } = await listRunsPage(db, {
    ownerId: null, threadId: options.thread, status: options.status, inDoubt: options.inDoubt, before: options.before,
    limit: options.limit ?? 50,
  });
  if (options.json) return `${JSON.stringify(runs, null, 2)}\n`;
  if (runs.length === 0) return noRunsLine(options);
  const table = formatTable(runsHeader, runs.map((run) => runRow(run, now)));
  return next ? `${table}older runs: ${nextPageCommand(options, next)}\n` : table;
}

/** The command line that lists the page after this one, with this one's filters. */
function nextPageCommand(options: RunsOptions, next: string): string {
  const args = ['agent-kit runs'];
  if (options.thread) args.push(`--thread ${options.thread}`);
  if (options.status) args.push(`--status ${options.status}`);
  if (options.inDoubt) args.push('--in-doubt');
  if (options.limit) args.push(`--limit ${options.limit}`);
  args.push(`--before ${next}`);
  return args.join(' ');
}

/** What an empty list says; an empty in-doubt list is the answer an operator hopes for. */
function noRunsLine(options: RunsOptions): string {
  const older = options.before ? 'older ' : '';
  const of = options.thread ? ` of thread ${options.thread}` : '';
  if (!options.inDoubt) return `no ${older}runs${of}\n`;
  return `no ${older}runs${of} with effects in doubt${options.status ? ` (status ${options.status})` : ''}\n`;
}

const runsHeader = [
  'RUN', 'STATUS', 'TURN', 'FENCE', 'ATT', 'LEASE HOLDER', 'LEASE', 'EFFECTS', 'IN DOUBT', 'TOKENS IN/OUT', 'UPDATED',
  'THREAD OWNER',
];

function runRow(run: RunSummary, now: Date): string[] {
  return [
    run.id,
    run.status,
    String(run.turnNo),
    String(run.fence),
    String(run.attempts),
    run.owner ?? '-',
    leaseCell(run, now),
    String(run.effects),
    run.inDoubt > 0 ? String(run.inDoubt) : '-', // a number stands out in a column of dashes
    run.usage ? `${run.usage.inputTokens.toLocaleString('en-US')}/${run.usage.outputTokens.toLocaleString('en-US')}` : '-',
    `${formatDuration(now.getTime() - run.updatedAt.getTime())} ago`,
    run.ownerId,
  ];
}

/** The lease's expiry; for a run waiting out a model retry (ADR-0098), when it may be claimed. */
function leaseCell(run: RunSummary, now: Date): string {
  if (run.leaseExpiresAt) return describeExpiry(run.leaseExpiresAt, now);
  if (run.status === 'queued' && run.retryDueAt && run.retryDueAt > now) return `retry in ${formatDuration(run.retryDueAt.getTime() - now.getTime())}`;
  return '-';
}

/** "expires in 12s" or "expired 3m ago" (lease time is the database's; close enough for people). */
export function describeExpiry(at: Date, now: Date): string {
  const ms = at.getTime() - now.getTime();
  return ms > 0 ? `expires in ${formatDuration(ms)}` : `expired ${formatDuration(-ms)} ago`;
}

/** A short human duration: 850ms, 12s, 4m, 3h, 2d. */
export function formatDuration(ms: number): string {
  const abs = Math.max(0, ms);
  if (abs < 1_000) return `${Math.round(abs)}ms`;
  if (abs < 60_000) return `${Math.round(abs / 1_000)}s`;
  if (abs < 3_600_000) return `${Math.round(abs / 60_000)}m`;
  if (abs < 86_400_000) return `${Math.round(abs / 3_600_000)}h`;
  return `${Math.round(abs / 86_400_000)}d`;
}

/** Left-aligned columns two spaces apart, header first. */
export function formatTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return `${[header, ...rows].map(line).join('\n')}\n`;
}
