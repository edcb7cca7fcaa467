// Hostile arguments to every command of the real CLI (`node bin/agent-kit.js`, built from src/),
// on the store the suite runs on: unknown flags, bad numbers, non-uuid and unknown ids, empty
// and oversized text, another owner's thread, SQL-looking values, bad configuration. Each exits
// non-zero within its deadline with one clear line on stderr (`error: …`), no
// stack trace, nothing on stdout, and the store's snapshot is unchanged.
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, openCliStore, packageDir, run, type CliStore, type RunResult } from './cli-kit.js';
import { sqlStrings } from './arbitraries.js';
import { Tally } from './hostile-kit.js';

const tally = new Tally('cli', 'commands');
let bin: string;
let store: CliStore;
let before: Record<string, string>;
const deadlineMs = 30_000; // a refusal takes a few seconds; longer means the command hung

beforeAll(async () => {
  [bin, store] = await Promise.all([buildCli(), openCliStore()]);
  before = await store.snapshot();
}, 300_000);
afterAll(async () => {
  tally.report();
  await store?.close();
});

interface CliCase {
  what: string;
  args: string[];
  env?: Record<string, string>;
  /** The refusal's reason: its stderr line must match. */
  says?: RegExp;
}

/** What is wrong with a refusal, or undefined when it is clean. */
function problemWith(result: RunResult): string | undefined {
  const lines = result.stderr.split('\n').map((l) => l.trimEnd()).filter(Boolean);
  if (result.timedOut) return `hung: killed after ${result.ms} ms`;
  if (result.code === 0) return 'exited 0';
  if (result.stdout.trim() !== '') return `printed to stdout: ${result.stdout.slice(0, 120)}`;
  if (lines.length === 0) return 'no message on stderr';
  if (!/^error: \S/.test(lines[0]!)) return `unclear message: ${lines[0]!.slice(0, 160)}`;
  if (lines.some((l) => /^\s+at\s/.test(l))) return 'stack trace on stderr';
  const hintOnly = lines.length === 2 && lines[1]!.startsWith('(Did you mean');
  if (lines.length > 1 && !hintOnly) return `${lines.length} lines on stderr: ${lines.join(' | ').slice(0, 200)}`;
  if (lines[0]!.length > 300) return `a ${lines[0]!.length}-character message`;
  return undefined;
}

async function tryCase(c: CliCase, on: CliStore): Promise<void> {
  const result = await run(process.execPath, [bin, ...c.args], {
    cwd: packageDir, env: { ...on.env, ...c.env }, timeoutMs: deadlineMs,
  });
  const problem = problemWith(result);
  const firstLine = result.stderr.split('\n').find((l) => l.trim() !== '') ?? '';
  const wrongReason = !problem && c.says && !c.says.test(firstLine)
    ? `refused for another reason: ${firstLine}` : undefined;
  tally.record(`agent-kit ${c.args[0] ?? ''}`, c.what, [1, 2], result.code ?? -1, problem ?? wrongReason, firstLine);
  expect(problem ?? wrongReason, `${c.what}: agent-kit ${c.args.join(' ').slice(0, 80)}`).toBeUndefined();
}

/**
 * Run cases one at a time per lane, all lanes at once; each lane is a store (one store may be
 * several lanes). Then every store's snapshot must still be the one taken at the start.
 */
async function tryAll(cases: CliCase[], lanes: CliStore[]) {
  const queue = [...cases];
  await Promise.all(lanes.map(async (lane) => {
    for (let c = queue.shift(); c; c = queue.shift()) await tryCase(c, lane);
  }));
  for (const lane of new Set(lanes)) expect(await lane.snapshot()).toEqual(before);
}

const unknownId = crypto.randomUUID();
const sql = sqlStrings[0]!;

/** Refused while parsing arguments or configuration, before the store is opened. */
function parseCases(): CliCase[] {
  const flag = (command: string, ...args: string[]): CliCase =>
    ({ what: 'unknown flag', args: [command, ...args, '--bogus'] });
  return [
    { what: 'unknown command', args: ['frobnicate'] },
    { what: 'unknown flag', args: ['--bogus'] },
    { what: '--to not a number', args: ['migrate', '--to', 'x'] },
    { what: '--to negative', args: ['migrate', '--to', '-1'] },
    { what: '--to fraction', args: ['migrate', '--to', '1.5'] },
    { what: '--to without a value', args: ['migrate', '--to'] },
    flag('migrate'),
    { what: 'no text', args: ['chat'] }, flag('chat', 'hi'),
    { what: '--thread without a value', args: ['chat', 'hi', '--thread'] },
    ...['chat', 'enqueue'].flatMap((command) => ['thread-1', sql, `${unknownId}x`].map((v) => ({
      what: '--thread not a uuid', args: [command, 'hi', '--thread', v], says: /^error: --thread must be a uuid, got /,
    }))),
    { what: 'no text', args: ['enqueue'] }, flag('enqueue', 'hi'),
    ...['-1', '0', 'abc', '3601', '86400', '', 'Infinity', '1e9']
      .map((v) => ({ what: `--budget ${v || '(empty)'}`, args: ['drain', '--budget', v] })),
    ...['0', '1.5', '101', 'x', '-3'].map((v) => ({ what: `--concurrency ${v}`, args: ['drain', '--concurrency', v] })),
    flag('drain'),
    ...['0', 'x', '1001'].map((v) => ({ what: `--limit ${v}`, args: ['reap', '--limit', v] })), flag('reap'),
    { what: '--concurrency 0', args: ['worker', '--concurrency', '0'] },
    ...['0', 'x', '60001'].map((v) => ({ what: `--poll-ms ${v}`, args: ['worker', '--poll-ms', v] })), flag('worker'),
    ...['sleeping', sql, ''].map((v) =>
      ({ what: `--status ${v === sql ? 'SQL-looking' : v || '(empty)'}`, args: ['runs', '--status', v] })),
    ...['0', '1001', 'x'].map((v) => ({ what: `--limit ${v}`, args: ['runs', '--limit', v] })), flag('runs', '--json'),
    { what: '--in-doubt with a value', args: ['runs', '--in-doubt=yes'] }, flag('runs', '--in-doubt'),
    ...['not-a-uuid', sql, `${unknownId}x`, ''].map((v) => ({
      what: '--before not a run id', args: ['runs', '--before', v], says: /^error: --before takes a run id, got /,
    })),
    ...['0', 'x', '1.5', '-1', '86401', ''].map((v) => ({
      what: `--stale ${v || '(empty)'}`, args: ['status', '--stale', v], says: /^error: --stale takes whole seconds 1\.\.86400, got /,
    })),
    { what: '--check with a value', args: ['status', '--check=yes'] }, flag('status', '--json'),
    { what: 'no run id', args: ['show'] },
    ...['not-a-uuid', sql, `${unknownId}x`, ''].map((v) => ({ what: 'run id not a uuid', args: ['show', v] })),
    flag('show', unknownId),
    { what: 'no run id or key', args: ['resolve-effect'] },
    { what: 'run id not a uuid', args: ['resolve-effect', 'not-a-uuid', 'k', '--happened'] },
    { what: 'no verdict', args: ['resolve-effect', unknownId, 'k'], says: /exactly one of --happened/ },
    { what: 'both verdicts', args: ['resolve-effect', unknownId, 'k', '--happened', '--did-not-happen'],
      says: /exactly one of --happened/ },
    flag('resolve-effect', unknownId, 'k', '--happened'),
    ...['cancel', 'takeover', 'release', 'restore'].flatMap((command): CliCase[] => [
      { what: 'no run id', args: [command] },
      ...['not-a-uuid', sql, ''].map((v) => ({ what: 'run id not a uuid', args: [command, v], says: /^error: RUN_ID must be a uuid, got / })),
      flag(command, unknownId),
    ]),
    { what: 'no run id or text', args: ['reply'] },
    { what: 'no text', args: ['reply', unknownId] },
    ...['not-a-uuid', sql, ''].map((v) => ({ what: 'run id not a uuid', args: ['reply', v, 'hi'], says: /^error: RUN_ID must be a uuid, got / })),
    flag('reply', unknownId, 'hi'),
    { what: 'no thread id', args: ['events'] },
    ...['not-a-uuid', sql, unknownId.slice(1)].map((v) => ({ what: 'thread id not a uuid', args: ['events', v] })),
    ...['-1', 'x', '1'.repeat(16)].map((v) =>
      ({ what: `--after ${v.length > 8 ? '16 digits' : v}`, args: ['events', unknownId, '--after', v] })),
    ...['0', '-1', 'x', '1'.repeat(16)].map((v) =>
      ({ what: `--turns ${v.length > 8 ? '16 digits' : v}`, args: ['events', unknownId, '--turns', v] })),
    { what: '--after with --turns', args: ['events', unknownId, '--after', '1', '--turns', '2'],
      says: /use --after or --turns, not both/ },
    flag('events', unknownId),
    { what: 'AGENT_KIT_INVOCATION_BUDGET=abc', args: ['drain'], env: { AGENT_KIT_INVOCATION_BUDGET: 'abc' } },
    { what: 'AGENT_KIT_MAX_RUN_ATTEMPTS=0', args: ['reap'], env: { AGENT_KIT_MAX_RUN_ATTEMPTS: '0' } },
    { what: 'AGENT_KIT_LEASE_TTL=-5', args: ['worker'], env: { AGENT_KIT_LEASE_TTL: '-5' } },
    { what: 'AGENT_KIT_INVOCATION_BUDGET=0', args: ['chat', 'hi'], env: { AGENT_KIT_INVOCATION_BUDGET: '0' } },
  ];
}

/** Refused by the store or the library after opening the store. */
function storeCases(): CliCase[] {
  const thread = store.alice.threadId;
  const empty = /non-empty/;
  const tooLong = /32001 characters; the limit is 32000/;
  const notFound = new RegExp(`thread ${unknownId} not found`);
  const textCases = (command: string): CliCase[] => [
    { what: 'empty text', args: [command, ''], says: empty },
    { what: 'blank text', args: [command, ' \n\t '], says: empty },
    { what: 'zero-width characters only', args: [command, '\u200b\u200b'], says: empty },
    { what: 'text over 32 000 chars', args: [command, 'x'.repeat(32_001)], says: tooLong },
    { what: 'text over 32 000 chars (3-byte)', args: [command, '字'.repeat(32_001)], says: tooLong },
    { what: '--thread unknown', args: [command, 'hi', '--thread', unknownId], says: notFound },
    // (Without --owner the command adds the turn as the thread's owner: no hostile input.)
    { what: '--thread of another owner, --owner bob', says: /thread \S+ is alice's, not bob's: leave --owner out, or pass --owner alice$/,
      args: [command, 'hi', '--thread', thread, '--owner', 'bob'] },
    { what: 'empty --owner', args: [command, 'hi', '--owner', ''], says: /owner/ },
  ];
  // chat and enqueue share startTurn's checks; chat gets the ones its own path reaches first.
  const chatCases = textCases('chat').filter((c) => /empty text|3-byte|--owner/.test(c.what));
  return [
    ...chatCases, ...textCases('enqueue'),
    { what: 'unknown run id', args: ['show', unknownId], says: /run .* not found/ },
    { what: '--before an unknown run', args: ['runs', '--before', unknownId], says: /"before" names no run of this list/ },
    { what: 'unknown effect', args: ['resolve-effect', unknownId, 'k', '--happened'], says: /effect k of run .* not found/ },
    { what: 'unknown thread id', args: ['events', unknownId], says: /thread .* not found/ },
    ...['cancel', 'takeover', 'release', 'restore'].map((command) =>
      ({ what: 'unknown run id', args: [command, unknownId], says: /run .* not found/ })),
    { what: 'empty --by', args: ['takeover', store.alice.runId, '--by', ''], says: /names its operator/ },
    { what: 'unknown run id', args: ['reply', unknownId, 'hi'], says: /run .* not found/ },
    { what: 'not held', args: ['reply', store.alice.runId, 'hi'], says: /is queued and not held by an operator: take it over first/ },
    ...['', ' \n\t ', '\u200b\u200b'].map((v) => ({ what: 'blank text', args: ['reply', store.alice.runId, v], says: empty })),
    { what: 'text over 32 000 chars', args: ['reply', store.alice.runId, 'x'.repeat(32_001)], says: tooLong },
    { what: 'empty --by', args: ['reply', store.alice.runId, 'hi', '--by', ' '], says: /names its operator/ },
    { what: 'empty --by', args: ['resolve-effect', unknownId, 'k', '--happened', '--by', ' '], says: /names who decided/ },
  ];
}

describe('agent-kit with hostile arguments', () => {
  it('every command refuses bad flags, numbers, ids and configuration with one line, writing nothing', async () => {
    // Parse errors never open the store, so three may share it.
    await tryAll(parseCases(), [store, store, store]);
  }, 180_000);

  it('empty, oversized or foreign input and unknown ids are refused after opening the store, writing nothing', async () => {
    // The embedded store is one process's at a time: there, two lanes run one by one each on
    // their own copy of the store (both checked unchanged after).
    const copy = store.copy?.();
    try {
      await tryAll(storeCases(), copy ? [store, copy] : [store, store, store]);
    } finally {
      await copy?.close();
    }
  }, 240_000);
});

describe('a bad model setting', () => {
  // createRuntime resolves the model before it opens the store, so nothing is left open. (Until
  // it did, the embedded store kept the process alive and Postgres's pool held it 10 s.)
  let bogus: Promise<RunResult> | undefined;
  const runBogus = () => (bogus ??= run(process.execPath, [bin, 'reap'], {
    cwd: packageDir, env: { ...store.env, AGENT_KIT_MODEL: 'bogus' }, timeoutMs: 8_000,
  }));

  it('AGENT_KIT_MODEL=bogus: `agent-kit reap` says why on one line and writes nothing', async () => {
    const result = await runBogus();
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/^error: Unknown model spec "bogus"/);
    expect(await store.snapshot()).toEqual(before);
  }, 30_000);

  it('AGENT_KIT_MODEL=bogus: `agent-kit reap` exits within 8 s', async () => {
    expect((await runBogus()).timedOut).toBe(false);
  }, 30_000);
});
