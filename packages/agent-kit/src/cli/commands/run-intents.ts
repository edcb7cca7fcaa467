// What an operator asks of a run, from the command line, as the operator page and the HTTP
// routes do: `agent-kit cancel`, `takeover`, `release`, `reply` (the operator's answer in a held
// run's place), and `restore` (an earlier answer back in the conversation). Each stores its intent in one SQL call and says what it did and what comes
// next. None runs a segment here: the run's segment, or the worker or drain that takes its job,
// acts on it with the app's own tools (this process has only the demo tools).
import { type Command, Option } from 'commander';
import type { Db } from '../../store/db.js';
import { uuidArgument, withDb } from '../main.js';

interface JsonOption {
  json?: boolean;
}

/** The commands that take only a run id (and --json): name, description, what it prints. */
const plain: Array<[name: string, description: string, format: (db: Db, runId: string, options: JsonOption) => Promise<string>]> = [
  ['cancel', 'ask a run to stop: it closes aborted with the text it had, at its next write or by the next drain', formatCancelCommand],
  ['release', 'give a taken-over run back: it is queued, due now, and goes on where it stopped', formatReleaseCommand],
  ['restore', 'put an earlier answer (a reply that a regeneration replaced) back in the conversation', formatRestoreCommand],
];

export function register(program: Command) {
  const runCommand = (name: string, description: string) => program
    .command(name)
    .description(description)
    .argument('<run-id>', 'the run id (a uuid)', uuidArgument('RUN_ID'))
    .option('--json', 'print the result as JSON, as the HTTP route answers');
  for (const [name, description, format] of plain) {
    runCommand(name, description).action(async (runId: string, options: JsonOption) => {
      process.stdout.write(await withDb((db) => format(db, runId, options)));
    });
  }
  runCommand('takeover', 'hold a run for a person: waiting_takeover now, or at its next write if it is running')
    .addOption(new Option('--by <name>', 'who holds it').default(process.env.USER || 'operator', '$USER, else "operator"'))
    .action(async (runId: string, options: JsonOption & { by: string }) => {
      process.stdout.write(await withDb((db) => formatTakeoverCommand(db, runId, options)));
    });
  program
    .command('reply')
    .description("answer in a held run's place: it closes completed with your text as the turn's reply")
    .argument('<run-id>', 'the run id (a uuid), taken over first (`agent-kit takeover`)', uuidArgument('RUN_ID'))
    .argument('<text>', 'the reply, as the person chatting reads it')
    .addOption(new Option('--by <name>', 'who replies').default(process.env.USER || 'operator', '$USER, else "operator"'))
    .option('--json', 'print the result as JSON, as the HTTP route answers')
    .action(async (runId: string, text: string, options: JsonOption & { by: string }) => {
      process.stdout.write(await withDb((db) => formatReplyCommand(db, runId, text, options)));
    });
}

const json = (value: unknown) => `${JSON.stringify(value)}\n`;

/** @throws NotFoundError; ConflictError for a closed run. */
export async function formatCancelCommand(db: Db, runId: string, options: JsonOption): Promise<string> {
  const { cancelRun } = await import('../../queue/run-intents.js');
  const { status } = await cancelRun(db, { runId });
  if (options.json) return json({ runId, status, cancelRequested: true });
  return status === 'running'
    ? `cancel requested: run ${runId} is running; its segment closes it aborted at its next write\n`
    : `cancel requested: run ${runId} is ${status}; the worker or \`agent-kit drain\` that takes its job (due now) closes it aborted\n`;
}

/** @throws NotFoundError; ConflictError for a closed run, one being cancelled, or one behind an earlier open run. */
export async function formatTakeoverCommand(db: Db, runId: string, options: JsonOption & { by: string }): Promise<string> {
  const { takeOverRun } = await import('../../queue/run-intents.js');
  const result = await takeOverRun(db, { runId, by: options.by });
  if (options.json) return json(result);
  return result.status === 'waiting_takeover'
    ? `run ${runId} is waiting_takeover, held by ${options.by}: \`agent-kit reply ${runId} TEXT\` answers in its place, ` +
      `\`agent-kit release ${runId}\` lets it go on\n`
    : `takeover requested: run ${runId} is running and parks waiting_takeover at its next write (within a moment ` +
      'while it streams, after a tool call under way), or, if its holder is dead, once its lease runs out and a worker ' +
      'or drain claims it\n';
}

/** @throws InvalidArgumentError for a blank text; NotFoundError; ConflictError when the run is not held. */
export async function formatReplyCommand(db: Db, runId: string, text: string, options: JsonOption & { by: string }): Promise<string> {
  const { replyToRun } = await import('../../queue/run-intents.js');
  const result = await replyToRun(db, { runId, by: options.by, text });
  if (options.json) return json(result);
  return `replied: run ${runId} is completed, with ${options.by}'s text as its answer\n`;
}

/** @throws NotFoundError; ConflictError when the run is not taken over. */
export async function formatReleaseCommand(db: Db, runId: string, options: JsonOption): Promise<string> {
  const { releaseRun } = await import('../../queue/run-intents.js');
  const result = await releaseRun(db, { runId });
  if (options.json) return json(result);
  return result.status === 'queued'
    ? `released: run ${runId} is queued, due now; a worker or \`agent-kit drain\` continues it where it stopped\n`
    : `takeover withdrawn: run ${runId} is ${result.status} and goes on\n`;
}

/**
 * As the operator: the thread's owner is looked up (restoreTurn takes it so that a user can only
 * restore in their own threads).
 * @throws NotFoundError; ConflictError while a turn of the thread is under way, or for a run that
 *   was left out as a turn after a replaced reply.
 */
export async function formatRestoreCommand(db: Db, runId: string, options: JsonOption): Promise<string> {
  const [{ restoreTurn }, { NotFoundError }] = await Promise.all([import('../../queue/restore-turn.js'), import('../../errors.js')]);
  const [thread] = await db.query<{ owner_id: string }>(
    'select t.owner_id from agent_kit_runs r join agent_kit_threads t on t.id = r.thread_id where r.id = $1', [runId]);
  if (!thread) throw new NotFoundError(`run ${runId} not found`);
  const result = await restoreTurn(db, { runId, ownerId: thread.owner_id });
  if (options.json) return json(result);
  if (!result.restored) return `run ${runId} is in the conversation already: nothing to restore\n`;
  return `restored: run ${runId}'s answer is back in thread ${result.threadId}; superseded ${result.superseded.join(', ')}\n`;
}
