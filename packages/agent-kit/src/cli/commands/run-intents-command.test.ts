// `agent-kit takeover`, `release` and `cancel` as an operator runs them, the real CLI on both
// stores: each says what it did, exits 0, and a refused one exits 1 with the library's reason.
// On Postgres the thread's viewers (a LISTEN elsewhere) hear each command's write before the
// command has exited: the command waits for its notification before closing the store.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildCli, openCliStore, run, type CliStore } from '../../../test/hostile/cli-kit.js';
import { onPostgres } from '../../../test/harness/test-db.js';
import { openDb } from '../../store/open.js';

let bin: string;
let store: CliStore;
beforeAll(async () => {
  [bin, store] = await Promise.all([buildCli(), openCliStore()]);
}, 300_000);
afterAll(async () => {
  await store?.close();
});

const cli = (args: string[]) => run(process.execPath, [bin, ...args], { env: store.env, timeoutMs: 60_000 });

it('takes a queued run over, releases it and cancels it; a closed run is not cancelled again', async () => {
  const { runId, threadId } = store.alice;
  const heard: string[] = [];
  const listener = onPostgres ? await openDb({ databaseUrl: store.env.DATABASE_URL }) : undefined;
  const unlisten = await listener?.listen('agent_kit_events', (payload) => heard.push(payload));
  try {
    const steps: Array<[string[], RegExp]> = [
      [['takeover', runId, '--by', 'olga'], new RegExp(`^run ${runId} is waiting_takeover, held by olga: `)],
      [['release', runId], new RegExp(`^released: run ${runId} is queued, due now`)],
      [['cancel', runId], new RegExp(`^cancel requested: run ${runId} is queued; the worker or \`agent-kit drain\``)],
    ];
    for (const [args, says] of steps) {
      const before = heard.length;
      const result = await cli(args);
      expect([result.code, result.stderr], args[0]).toEqual([0, '']);
      expect(result.stdout).toMatch(says);
      // Heard before the command exited (allow the notification its trip to this listener).
      if (listener) await expect.poll(() => heard.slice(before), { timeout: 2_000 }).toContain(`${threadId}:0`);
    }
    const drained = await run(process.execPath, [bin, 'drain', '--budget', '30'], { env: store.env, timeoutMs: 60_000 });
    expect(drained.code, drained.stderr).toBe(0);
    const again = await cli(['cancel', runId]);
    expect([again.code, again.stderr]).toEqual([1, `error: run ${runId} is already aborted: nothing to cancel\n`]);
    const shown = await cli(['show', runId]);
    expect(shown.stdout).toMatch(/status\s+aborted/);
  } finally {
    await unlisten?.();
    await listener?.close();
  }
}, 180_000);
