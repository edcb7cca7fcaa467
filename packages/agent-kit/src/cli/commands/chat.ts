// `agent-kit chat "text" [--thread ID]`: run one turn in this process and stream its text to
// stdout, the way the chat request does: start the turn, follow the thread's events, run the
// segment. A question or approval the turn waits for is printed with the command that answers it.
import { type Command, CommanderError } from 'commander';
import type { EventFollower, ThreadEvent } from '../../event-log/index.js';
import { runFailureText } from '../../event-log/run-failure.js';
import type { Queryable } from '../../store/db.js';
import type { SegmentOutcome } from '../../turn/types.js';
import { cliTurnOwner, ownerOption } from './enqueue.js';
import { formatDuration } from './runs.js';
import { stdoutClosed, uuidArgument } from '../main.js';
import { withRuntime } from './with-runtime.js';

export function register(program: Command) {
  program
    .command('chat')
    .description('run one turn here and stream its reply to stdout')
    .argument('<text>', 'the user message')
    .option('--thread <id>', 'continue this thread (default: a new thread)', uuidArgument('--thread'))
    .option(...ownerOption)
    .action(async (text: string, options: { thread?: string; owner?: string }) => {
      const [{ followEvents, readLastSeq }, { defaultHeadStartMs, startTurn }, { newOwner, runSegment, finishTheStep, turnSettingsOf }] = await Promise.all([
        import('../../event-log/index.js'), import('../../queue/start-turn.js'), import('../../turn/index.js'),
      ]);
      // No log lines: stdout is the reply and stderr the few notes a person needs.
      await withRuntime(async (rt) => {
        // (Before the run is named: an interrupt from then on is the turn's.)
        const stop = stopOnInterrupt(turnSettingsOf(rt, rt.config.invocationBudgetMs).stopGraceMs / 1000, finishTheStep);
        const ownerId = await cliTurnOwner(rt.db, options);
        const afterSeq = options.thread ? await readLastSeq(rt.db, options.thread) : 0;
        const turn = await startTurn(rt.db, {
          // As the chat request does: a worker beside this process (woken by the job's NOTIFY)
          // takes the turn only if this process dies before claiming it.
          threadId: options.thread, ownerId, text, jobDelayMs: defaultHeadStartMs,
        });
        process.stderr.write(`thread ${turn.threadId} · run ${turn.runId}\n`);
        const follower = followEvents(rt.db, {
          threadId: turn.threadId,
          afterSeq,
          until: (e) => e.runId === turn.runId && (e.type === 'run-closed' || e.type === 'run-parked'),
        });
        // The follower ends at the run's close or park; a segment that ended otherwise (stopped,
        // lost) ends it once it has printed what the log holds now, which the segment wrote.
        let endAt = Number.POSITIVE_INFINITY;
        const printing = printRun(upTo(follower, () => endAt), turn.runId);
        // Awaited once the segment returns; a follower that gave up on a long outage meanwhile
        // (its minute) must not end the process as an unhandled rejection while the segment
        // still waits to hand the run on.
        printing.catch(() => {});
        const outcome = await runSegment(rt, { runId: turn.runId, owner: newOwner('cli'), stopSignal: stop.signal })
          .catch(async (error: unknown) => {
            // (A claim the database refused, say: the follower stops before the store closes under it.)
            follower.close();
            await printing.catch(() => {});
            throw error;
          })
          .finally(stop.dispose);
        if (outcome.kind !== 'closed' && outcome.kind !== 'parked') {
          setTimeout(() => follower.close(), catchUpMs).unref(); // a store that does not answer included
          endAt = await readLastSeq(rt.db, turn.threadId).catch(() => follower.cursor);
          if (follower.cursor >= endAt) follower.close();
        }
        await printing;
        const queued = outcome.kind === 'parked' && outcome.status === 'queued';
        report(outcome, turn.runId, turn.threadId, queued ? await jobDueInMs(rt.db, turn.runId) : null);
      }, {});
    });
}

/**
 * Ctrl-C (or SIGTERM, or a reader that closed stdout) while the turn runs here: the segment stops
 * after the step under way (a model step is cut after `stopGraceMs`) and queues the run, due now, for a drain or a worker, and the command
 * exits 1 saying so. A second Ctrl-C quits at once; the run is then taken over when its lease
 * runs out. (Killed outright, the command left the run held by a dead process for its lease.)
 */
function stopOnInterrupt(graceSeconds: number, finishTheStep: string): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  // A signal cuts a long model step after its grace (ADR-0117); a reader gone lets it finish.
  const stop = (why: string, reason?: string) => {
    if (controller.signal.aborted) return;
    const within = reason === finishTheStep ? '' : `, or within ${graceSeconds} s`;
    process.stderr.write(`\n[${why}: stopping after the step under way${within}; a drain goes on from there]\n`);
    controller.abort(reason);
  };
  const interrupted = () => {
    if (controller.signal.aborted) {
      process.stderr.write('[stopped now: the run is taken over once its lease runs out]\n');
      process.exit(130);
    }
    stop('interrupted; again to quit now');
  };
  const terminated = () => stop('terminated');
  const previous = stdoutClosed.handle;
  stdoutClosed.handle = () => stop('stdout closed', finishTheStep);
  process.on('SIGINT', interrupted);
  process.on('SIGTERM', terminated);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', interrupted);
      process.off('SIGTERM', terminated);
      stdoutClosed.handle = previous;
    },
  };
}

/** Longest the command waits for its follower to print what a segment that did not finish wrote. */
const catchUpMs = 5_000;

/** The events of `follower` until the seq `endAt()` (infinite until set), then it is closed. */
async function* upTo(follower: EventFollower, endAt: () => number): AsyncGenerator<ThreadEvent> {
  for await (const event of follower) {
    yield event;
    if (event.seq >= endAt()) {
      follower.close();
      return;
    }
  }
}

async function printRun(events: AsyncIterable<{ runId: string | null; type: string; data: Record<string, unknown> }>, runId: string) {
  let shown = '';
  // A resumed segment, and a model step asked again, go on from a text: print only what the
  // terminal does not have, or the whole text again when what it has was dropped.
  const goOnFrom = (text: string, marker: string) => {
    if (text.startsWith(shown)) process.stdout.write(text.slice(shown.length));
    else process.stdout.write(`\n[${marker}]\n${text}`);
    shown = text;
  };
  // What the model thinks goes to stderr as it streams, on lines of its own (ADR-0070).
  let thinking = false;
  for await (const event of events) {
    if (event.runId !== runId) continue;
    if (event.type === 'reasoning-delta') {
      if (!thinking) process.stderr.write(`${shown === '' || shown.endsWith('\n') ? '' : '\n'}[thinking] `);
      process.stderr.write(String(event.data.text ?? ''));
      thinking = true;
      continue;
    }
    if (thinking) process.stderr.write('\n');
    thinking = false;
    if (event.type === 'segment-started') {
      goOnFrom(String(event.data.text ?? ''), 'resumed');
    } else if (event.type === 'text-delta') {
      const delta = String(event.data.text ?? '');
      process.stdout.write(delta);
      shown += delta;
    } else if (event.type === 'step-finished' && event.data.finishReason === 'length') {
      // The reply stops where the model's output limit cut it (ADR-0068).
      process.stderr.write(`${shown === '' || shown.endsWith('\n') ? '' : '\n'}[the reply reached the model's output limit]\n`);
    } else if (event.type === 'tool-result') {
      process.stderr.write(`\n[tool ${String(event.data.toolName)}: ${String(event.data.outcome)}]\n`);
    } else if ((event.type === 'model-retry' || event.type === 'prompt-cut') && contextCut(event.data)) {
      // A prompt past the model's context window, asked again at once with less of it (ADR-0067),
      // or cut before it was sent to the window the thread learned (ADR-0069).
      const how = event.type === 'prompt-cut' ? 'sent' : 'asked again';
      process.stderr.write(`[the thread is past the model's context window: ${how} ${contextCut(event.data)}]\n`);
    } else if (event.type === 'model-retry') {
      const d = event.data;
      const refusal = (d.error ?? {}) as { message?: unknown; statusCode?: unknown };
      const status = typeof refusal.statusCode === 'number' ? `${refusal.statusCode} ` : '';
      const lead = shown === '' || shown.endsWith('\n') ? '' : '\n'; // refused mid-reply: on a line of its own
      process.stderr.write(`${lead}[model refused: ${status}${String(refusal.message)}; retry ${String(d.retry)} of ${String(d.of)}` +
        ` in ${(Number(d.delayMs) / 1000).toFixed(1)} s]\n`);
      if (typeof d.text === 'string') goOnFrom(d.text, 'the step starts again'); // ADR-0061
    } else if (event.type === 'run-closed' && runFailureText(event.data.error)) {
      // Failed by its own segment (ADR-0066): the provider's refusal for good, or the step limit.
      const lead = shown === '' || shown.endsWith('\n') ? '' : '\n';
      process.stderr.write(`${lead}[${runFailureText(event.data.error)}]\n`);
    } else if (event.type === 'input-requested') {
      const d = event.data;
      process.stderr.write(d.kind === 'approval'
        ? `\n[approval needed for ${String(d.toolName)} ${JSON.stringify(d.input)}]\n`
        : `\n[question] ${String(d.question)}\n`);
    }
  }
  process.stdout.write('\n');
}

/** How long until the run's job is due (a drain may claim it then), or null without one. */
async function jobDueInMs(db: Queryable, runId: string): Promise<number | null> {
  const [row] = await db.query<{ ms: number | string | null }>(
    'select extract(epoch from due_at - agent_kit_now()) * 1000 as ms from agent_kit_jobs where run_id = $1', [runId]);
  return row?.ms === null || row?.ms === undefined ? null : Number(row.ms);
}

/** Say how the turn ended here; a turn that did not complete (or wait for input) is exit 1. */
function report(outcome: SegmentOutcome, runId: string, threadId: string, dueInMs: number | null): void {
  if (outcome.kind === 'closed' && outcome.status === 'completed') return;
  if (outcome.kind === 'parked' && outcome.status === 'waiting_input') {
    process.stderr.write(`run ${runId} waits for input: answer with \`agent-kit chat "<answer>" --thread ${threadId}\`` +
      ' (to an approval, "yes" approves and anything else denies)\n');
    return;
  }
  // Queued: sliced at the budget's end, or parked until the model's provider takes it (ADR-0062).
  const what = outcome.kind === 'closed'
    ? `run ${runId} closed ${outcome.status}`
    : outcome.kind === 'parked' && outcome.status === 'queued'
      ? `run ${runId} is queued${dueInMs === null ? '' : dueInMs > 0 ? `, due in ${formatDuration(dueInMs)}` : ', due now'}: ` +
        '`agent-kit drain` or a worker continues it'
      : outcome.kind === 'lost' || outcome.kind === 'not-claimed'
        ? `run ${runId} did not finish here (${JSON.stringify(outcome)}): another segment holds it`
        : `run ${runId} did not finish here (${JSON.stringify(outcome)}); a worker continues it, or \`agent-kit reap\` ` +
          'then `agent-kit drain` (the reaper hands it on once its lease has run out)';
  throw new CommanderError(1, 'agent-kit.turnNotCompleted', what);
}

/** What a model-retry or prompt-cut event left out of the prompt to fit the context window (ADR-0067), in words. */
export function contextCut(data: Record<string, unknown>): string | undefined {
  const count = (value: unknown, key: 'kept' | 'dropped') => {
    const cut = value as Record<string, unknown> | null | undefined;
    return typeof cut?.[key] === 'number' && typeof cut.of === 'number' ? [cut[key], cut.of] : undefined;
  };
  const turns = count(data.earlierTurns, 'kept');
  if (turns) return `with the newest ${turns[0]} of ${turns[1]} earlier turns`;
  const results = count(data.toolResults, 'dropped');
  if (results) return `without ${results[0]} of the turn's ${results[1]} answered tool results`;
  const cutTo = (data.toolResults as { cutTo?: unknown } | null | undefined)?.cutTo;
  return typeof cutTo === 'number' ? `with the newest tool results cut to ${cutTo} characters` : undefined;
}
