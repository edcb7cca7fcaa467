// The real `agent-kit worker` as a platform meets it: stopped by a deploy's SIGTERM, it parks the
// turn it runs and exits 0, whatever SIGTERMs follow while it parks (ADR-0124). On Postgres: a
// worker holds the embedded store's one connection.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, openCliStore, run, type CliStore } from '../../../test/hostile/cli-kit.js';
import { onPostgres } from '../../../test/harness/test-db.js';

describe.runIf(onPostgres)('agent-kit worker', () => {
  let bin!: string;
  let store!: CliStore;
  beforeAll(async () => void ([bin, store] = await Promise.all([buildCli(), openCliStore()])), 300_000);
  afterAll(() => store?.close());

  const cli = (args: string[], env: NodeJS.ProcessEnv) => run(process.execPath, [bin, ...args], { env, timeoutMs: 60_000 });

  it('parks the turn it runs on SIGTERM and exits 0, a SIGTERM repeated meanwhile included', async () => {
    // Its first step thinks for 2 s; a stop cuts a model step after 1.5 s (ADR-0117).
    const env = { ...store.env, AGENT_KIT_SCRIPTED_DELAY_MS: '100', AGENT_KIT_STOP_GRACE: '1.5' };
    const enqueued = await cli(['enqueue', 'a long think #think'], env);
    expect(enqueued.code, enqueued.stderr).toBe(0);
    const { runId } = JSON.parse(enqueued.stdout) as { runId: string };
    const statusOf = async () => JSON.parse((await cli(['show', runId, '--json'], env)).stdout).run.status as string;
    const worker = spawn(process.execPath, [bin, 'worker'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let workerLog = '';
    worker.stderr.on('data', (chunk: Buffer) => (workerLog += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      worker.once('exit', (code, signal) => resolve({ code, signal }));
    });
    try {
      await expect.poll(statusOf, { timeout: 30_000, interval: 100 }).toBe('running');
      worker.kill('SIGTERM');
      await expect.poll(() => workerLog, { timeout: 10_000, interval: 20 }).toContain('"msg":"worker: stopping');
      // A deploy's SIGTERM and then a shutdown's, while the turn parks (before: the second one
      // killed the worker by the default action, its segment mid-park).
      worker.kill('SIGTERM');
      expect(await exited, workerLog).toEqual({ code: 0, signal: null });
      expect(await statusOf()).toBe('queued');
    } finally {
      worker.kill('SIGKILL');
    }
  });
});
