// The real `agent-kit chat` (and its neighbours) as a person or a script meets them, on both
// stores: a completed turn exits 0 with the reply on stdout; a turn the model fails exits 1 with
// one line saying why (no provider stack trace); a malformed thread id is a usage error; an
// embedded store never migrated is migrated, a server never migrated says to migrate; and, on
// Postgres, a worker running beside the command does not take the turn from it (the reply still
// reaches the terminal).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, openCliStore, run, type CliStore } from '../../../test/hostile/cli-kit.js';
import { contextLengthExceeded, startOpenAiStub, type OpenAiStub } from '../../../test/harness/openai-stub.js';
import { adminQuery, onPostgres } from '../../../test/harness/test-db.js';
import { createEmptyDatabase } from '../../../test/harness/empty-database.js';
import { scriptedReasoningText, scriptedReplyText } from '../../model/index.js';
import { openDb } from '../../store/open.js';
import { contextCut } from './chat.js';

let bin: string;
let store: CliStore;
beforeAll(async () => {
  bin = await buildCli();
  store = await openCliStore();
}, 300_000);
afterAll(async () => {
  await store?.close();
});

const cli = (args: string[], env: NodeJS.ProcessEnv = store.env) =>
  run(process.execPath, [bin, ...args], { env, timeoutMs: 60_000 });

/** `test` with the OpenAI-compatible stub running and the environment that points the CLI at it. */
async function withOpenAiStub(test: (stub: OpenAiStub, env: NodeJS.ProcessEnv) => Promise<void>) {
  const stub = await startOpenAiStub();
  try {
    await test(stub, { ...store.env, AGENT_KIT_MODEL: 'openai-compatible:stub-model', OPENAI_BASE_URL: stub.baseURL, OPENAI_API_KEY: 'k' });
  } finally {
    await stub.close();
  }
}

describe('agent-kit chat', () => {
  it('streams a completed turn to stdout and exits 0', async () => {
    const result = await cli(['chat', 'hello there']);
    expect(result.stderr).toMatch(/^thread [0-9a-f-]{36} · run [0-9a-f-]{36}\n$/);
    expect(result.stdout.trim().split(' ').length).toBeGreaterThan(3); // the scripted reply
    expect(result.code).toBe(0);
  });

  it('prints what the model thinks to stderr, on a line of its own, and only the reply to stdout', async () => {
    const text = 'think first #think';
    const result = await cli(['chat', text]);
    expect(result.code).toBe(0);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toEqual([expect.stringMatching(/^thread /), `[thinking] ${scriptedReasoningText([text], 0, 40)}`]);
    expect(result.stdout).toBe(`${scriptedReplyText([text], 40)}\n`);
  });

  it('exits 1 with one line when the model fails, and prints no provider stack trace', async () => {
    // A provider on a closed port: the call fails at once, and is asked again once (a refused
    // connection may be a provider restarting, ADR-0057); then the segment records the failure.
    const env = {
      ...store.env, AGENT_KIT_MODEL: 'openai-compatible:nothing', OPENAI_BASE_URL: 'http://127.0.0.1:1/v1', OPENAI_API_KEY: 'k',
      AGENT_KIT_MODEL_RETRIES: '1',
    };
    const result = await cli(['chat', 'this will fail'], env);
    expect(result.code).toBe(1); // 0 before: the command set an exit code that main then replaced
    const lines = result.stderr.trim().split('\n');
    expect(lines[0]).toMatch(/^thread \S+ · run \S+$/);
    expect(lines[1]).toMatch(/^\[model refused: Cannot connect to API: .*; retry 1 of 1 in [01]\.\d s\]$/);
    expect(lines.at(-1)).toMatch(/^error: run \S+ did not finish here \(.*"kind":"stopped".*\); a worker continues it, or `agent-kit reap` then `agent-kit drain`/);
    expect(lines.length).toBeLessThanOrEqual(4); // ~50 lines of the AI SDK's console.error before
    expect(result.stderr).not.toContain('APICallError');
  });

  it('says so when the model is busy, waits, and finishes the turn', async () => {
    // #busy: the scripted model answers its first request with a 429 and "retry after 1 s".
    const result = await cli(['chat', 'are you there #busy']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/^thread \S+ · run \S+\n\[model refused: 429 the scripted model is busy \(#busy\): try again in 1000 ms; retry 1 of 5 in 1\.0 s\]\n$/);
    expect(result.stdout.trim().split(' ').length).toBeGreaterThan(3);
  });

  it('says so when the model is overloaded mid-reply, and the reply goes on from where it was cut', async () => {
    // #overload: the scripted model stops halfway with a 529; asked again, it continues the half.
    const message = 'tell me more #overload';
    const result = await cli(['chat', message]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/^thread \S+ · run \S+\n\n\[model refused: 529 the scripted model is overloaded \(#overload\): try again in 1000 ms; retry 1 of 5 in 1\.0 s\]\n$/);
    expect(result.stdout).toBe(`${scriptedReplyText([message], 40)}\n`); // each word once, none lost
  });

  it('says so when a model without prefill fails mid-reply, and prints the reply again from the start of the step', async () => {
    // OpenAI's server_error after two words (the local stub): the step is asked again from its
    // start (ADR-0061), and the terminal, which cannot take back what it printed, says so.
    await withOpenAiStub(async (stub, env) => {
      const result = await cli(['chat', 'a server error mid-reply'], env);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toMatch(
        /^thread \S+ · run \S+\n\n\[model refused: 500 server_error: The server had an error while processing your request\.; retry 1 of 5 in [01]\.\d s\]\n$/);
      expect(result.stdout).toBe('Hello from\n[the step starts again]\nHello from stub\n');
      expect(stub.received).toHaveLength(2);
    });
  });

  it('says why the turn failed when the provider rejects its request for good, and exits 1 at once', async () => {
    await withOpenAiStub(async (stub, env) => {
      const result = await cli(['chat', 'a message too long for the model'], env);
      expect(result.code).toBe(1);
      const lines = result.stderr.trim().split('\n');
      expect(lines.slice(1)).toEqual([
        `[the model's provider refused the request (400): ${contextLengthExceeded}]`, expect.stringMatching(/^error: run \S+ closed failed$/),
      ]);
      expect(stub.received).toHaveLength(1); // not asked again (ADR-0066)

      // The next turn of that thread carries the failed one in its history: refused, it is asked
      // again at once without it (ADR-0067), and says so.
      const threadId = /^thread (\S+)/.exec(lines[0]!)![1]!;
      const next = await cli(['chat', 'and now?', '--thread', threadId], env);
      expect(next.stderr.trim().split('\n').slice(1)).toEqual([
        "[the thread is past the model's context window: asked again with the newest 0 of 1 earlier turns]",
      ]);
      expect([next.stdout, next.code]).toEqual(['Hello from stub\n', 0]);
      expect(stub.received).toHaveLength(3);
      // The thread learned the window: its next turn is cut before it is sent (ADR-0069).
      const third = await cli(['chat', 'and then?', '--thread', threadId], env);
      expect(third.stderr.trim().split('\n').slice(1)).toEqual([
        "[the thread is past the model's context window: sent with the newest 0 of 2 earlier turns]",
      ]);
      expect([third.stdout, third.code]).toEqual(['Hello from stub\n', 0]);
      expect(stub.received).toHaveLength(4);
    });
  });

  it("says when the reply stopped at the model's output limit", async () => {
    await withOpenAiStub(async (stub, env) => {
      const result = await cli(['chat', 'tell me a long story'], env);
      expect([result.stdout, result.code]).toEqual(['Hello from stub\n', 0]);
      // On a line of its own after the reply's last words, as a terminal shows both streams.
      expect(result.stderr).toMatch(/^thread \S+ · run \S+\n\n\[the reply reached the model's output limit\]\n$/);
    });
  });

  it("says when the turn is queued until the model's provider takes it, a wait too long for its budget", async () => {
    // #busy asks for a 1 s wait; with a 1 s budget it cannot be waited out here, so the run is
    // parked with its job due then (ADR-0062), and the command says who continues it.
    const result = await cli(['chat', 'are you there #busy'], { ...store.env, AGENT_KIT_INVOCATION_BUDGET: '1' });
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines[1]).toMatch(/^\[model refused: 429 .*; retry 1 of 5 in 1\.0 s\]$/);
    // Due in under a second; on a loaded machine the second may have passed when the command looks.
    expect(lines.at(-1)).toMatch(/^error: run \S+ is queued, due (in \d+(ms|s)|now): `agent-kit drain` or a worker continues it$/);
  });

  it("continues a user's thread as its owner: the answer command it prints works as printed", async () => {
    // alice's question; the command prints how to answer it, with no --owner.
    const asked = await cli(['chat', 'plan a trip #ask', '--owner', 'alice']);
    expect(asked.code, asked.stderr).toBe(0);
    const command = /answer with `agent-kit chat "<answer>" --thread ([0-9a-f-]{36})`/.exec(asked.stderr);
    expect(command, asked.stderr).not.toBeNull();
    const threadId = command![1]!;
    const answered = await cli(['chat', 'blue', '--thread', threadId]); // (was: thread … not found)
    expect(answered.code, answered.stderr).toBe(0);
    expect(answered.stdout.trim().split(' ').length).toBeGreaterThan(3);
    // enqueue the same way; another --owner is refused, saying whose the thread is.
    const queued = await cli(['enqueue', 'and a hotel', '--thread', threadId]);
    expect(queued.code, queued.stderr).toBe(0);
    const before = await store.snapshot();
    const bob = await cli(['enqueue', 'mine now', '--thread', threadId, '--owner', 'bob']);
    expect([bob.code, bob.stderr.trim()]).toEqual([1, `error: thread ${threadId} is alice's, not bob's: leave --owner out, or pass --owner alice`]);
    expect(await store.snapshot()).toEqual(before);
    const owners = JSON.parse((await cli(['runs', '--thread', threadId, '--json'])).stdout) as { ownerId: string; status: string }[];
    expect(owners.map((r) => [r.ownerId, r.status])).toEqual([['alice', 'queued'], ['alice', 'completed']]);
  });

  it('refuses a malformed --thread as a usage error, writing nothing', async () => {
    const before = await store.snapshot();
    const result = await cli(['chat', 'hi', '--thread', 'nope']);
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toBe('error: --thread must be a uuid, got "nope"');
    expect(await store.snapshot()).toEqual(before);
  });

  it('Ctrl-C stops the turn after its step and queues it for a drain, which finishes it; a second Ctrl-C quits at once', async () => {
    const env = { ...store.env, AGENT_KIT_SCRIPTED_DELAY_MS: '100' };
    /** `chat text`, interrupted `times` times once its stderr shows `at`; its exit code, stderr and run. */
    const interrupted = (text: string, times: number, at: RegExp) => new Promise<{ code: number | null; stderr: string; runId: string }>((resolve) => {
      const child = spawn(process.execPath, [bin, 'chat', text], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        const first = !at.test(stderr);
        stderr += chunk.toString();
        if (first && at.test(stderr)) for (let i = 0; i < times; i++) setTimeout(() => child.kill('SIGINT'), 100 * i);
      });
      child.once('exit', (code) => resolve({ code, stderr, runId: / · run ([0-9a-f-]{36})/.exec(stderr)?.[1] ?? '' }));
    });
    const statusOf = async (runId: string) => JSON.parse((await cli(['show', runId, '--json'], env)).stdout).run.status as string;

    // Its first step thinks for 2 s: interrupted as it starts, it stops before the step or after it.
    const once = await interrupted('stop me here #think #effect', 1, / · run /);
    expect(once.stderr, once.stderr).toMatch(/\[interrupted; again to quit now: stopping after the step under way/);
    expect(once.stderr, once.stderr).toMatch(/is queued, due now: `agent-kit drain` or a worker continues it/);
    expect(once.code, once.stderr).toBe(1);
    expect(await statusOf(once.runId)).toBe('queued'); // (was: running, held by the dead process for its lease)
    expect((await cli(['drain'], env)).code).toBe(0);
    expect(await statusOf(once.runId)).toBe('completed');

    const twice = await interrupted('stop me now #think #effect', 2, /\[thinking\] /); // (in the step)
    expect(twice.code, twice.stderr).toBe(130);
    expect(twice.stderr).toMatch(/\[stopped now: the run is taken over once its lease runs out\]/);

    // `agent-kit chat … | head -c 20`: the reader closes stdout in the reply's last step, which
    // ends the turn here (the command used to exit 0 at once, the run left held by nobody).
    const piped = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [bin, 'chat', 'read a little #effect'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.stdout.once('data', () => child.stdout.destroy());
      child.once('exit', (code) => resolve({ code, stderr }));
    });
    expect(piped.stderr).toMatch(/\[stdout closed: stopping after the step under way/);
    expect(piped.code, piped.stderr).toBe(0);
    expect(await statusOf(/ · run ([0-9a-f-]{36})/.exec(piped.stderr)![1]!)).toBe('completed');
  });

  it.runIf(onPostgres)('shows the reply even with a worker running beside it', async () => {
    const worker = spawn(process.execPath, [bin, 'worker'], { env: store.env, stdio: ['ignore', 'ignore', 'pipe'] });
    let workerLog = '';
    worker.stderr.on('data', (chunk: Buffer) => (workerLog += chunk.toString()));
    try {
      const startedMs = Date.now();
      while (!workerLog.includes('worker: started')) {
        if (Date.now() - startedMs > 20_000) throw new Error(`the worker did not start: ${workerLog}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      for (let i = 0; i < 3; i++) {
        const result = await cli(['chat', `race ${i}`]);
        // Before: the worker, woken by the job's NOTIFY, claimed first; the command printed
        // nothing and exited saying the drain would continue the turn.
        expect(result.code).toBe(0);
        expect(result.stdout.trim().split(' ').length).toBeGreaterThan(3);
      }
    } finally {
      worker.kill('SIGTERM');
      await new Promise((r) => worker.once('exit', r));
    }
  });

  it.runIf(onPostgres)('a worker whose LISTEN hears nothing says so, and names AGENT_KIT_LISTEN_URL (ADR-0106)', async () => {
    // LISTEN on another database of the server: accepted, and deaf to the store's notifications,
    // as through a pooler in transaction mode.
    const env = { ...store.env, AGENT_KIT_LISTEN_URL: process.env.DATABASE_URL };
    const worker = spawn(process.execPath, [bin, 'worker'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let workerLog = '';
    worker.stderr.on('data', (chunk: Buffer) => (workerLog += chunk.toString()));
    try {
      const startedMs = Date.now();
      const deaf = /"msg":"LISTEN on agent_kit_jobs did not hear its own notification within 5000 ms: [^"]*AGENT_KIT_LISTEN_URL/;
      while (!deaf.test(workerLog)) {
        if (Date.now() - startedMs > 30_000) throw new Error(`the worker did not say its LISTEN was deaf: ${workerLog}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      worker.kill('SIGTERM');
      await new Promise((r) => worker.once('exit', r));
    }
  });
});

describe('commands on a store that was never migrated', () => {
  it('migrate the embedded store first, as the commands that run turns do', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-kit-unmigrated-'));
    const env = { ...store.env, AGENT_KIT_DATA_DIR: dataDir, DATABASE_URL: '' };
    try {
      // A read first: it asked for a migrate that `chat` and `enqueue`'s neighbours never needed.
      const runs = await cli(['runs'], env);
      expect({ code: runs.code, stderr: runs.stderr }).toEqual({ code: 0, stderr: '' });
      const enqueued = await cli(['enqueue', 'hi'], env);
      expect(enqueued.code).toBe(0);
      const { runId } = JSON.parse(enqueued.stdout) as { runId: string };
      const listed = await cli(['runs', '--json'], env);
      expect((JSON.parse(listed.stdout) as { id: string; status: string }[]).map((r) => [r.id, r.status]))
        .toEqual([[runId, 'queued']]);
      const migrated = await cli(['migrate', '--to', '99'], env);
      expect(migrated.code).toBe(2);
      expect(migrated.stderr.trim()).toMatch(/^error: --to must be a migration number from 0 to \d+, got 99$/);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it.runIf(onPostgres)('migrate and status name the schema the tables are in, from the search_path', async () => {
    const empty = await createEmptyDatabase();
    try {
      await adminQuery(`alter database ${empty.name} set search_path = agent`);
      const db = await openDb({ databaseUrl: empty.url });
      await db.query('create schema agent').finally(() => db.close());
      const env = { ...store.env, DATABASE_URL: empty.url };
      const where = `postgres, ${new URL(empty.url).host}/${empty.name}, schema agent`;
      const migrated = await cli(['migrate'], env);
      expect(migrated.stdout.trim()).toMatch(new RegExp(`^applied 0001, .*; schema at \\d{4} \\(${where.replace(/[.]/g, '\\.')}\\)$`));
      expect((await cli(['status'], env)).stdout.split('\n')[0]).toBe(`store     ${where}`);
      // A connection whose search_path lost the schema (a pooler that dropped it) is told where
      // the tables are, not to migrate (which would make a second, empty set in public).
      await adminQuery(`alter database ${empty.name} reset search_path`);
      const lost = await cli(['status'], env);
      expect([lost.code, lost.stderr.trim()]).toEqual([1, expect.stringMatching(
        /^error: agent-kit's tables are in schema agent, but this connection reads schema public: put agent first on the role's search_path/)]);
    } finally {
      await empty.drop();
    }
  });

  it.runIf(onPostgres)('exits 1 with the one line of an error the database gave the claim, and no crash of its follower', async () => {
    // A role without a grant the claim needs (a trigger stands in for it): the command printed
    // the error, then crashed with "Cannot use a pool after calling end on the pool".
    const empty = await createEmptyDatabase();
    const env = { ...store.env, DATABASE_URL: empty.url };
    try {
      expect((await cli(['migrate'], env)).code).toBe(0);
      const db = await openDb({ databaseUrl: empty.url });
      try {
        await db.query(`create function refuse_claims() returns trigger language plpgsql as $$
          begin raise exception 'permission denied for table agent_kit_jobs' using errcode = '42501'; end $$`);
        await db.query(`create trigger refuse_claims before update on agent_kit_runs for each row
          when (old.status = 'queued' and new.status = 'running') execute function refuse_claims()`);
      } finally {
        await db.close();
      }
      const result = await cli(['chat', 'claim me'], env);
      expect(result.code).toBe(1);
      expect(result.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(/^thread \S+ · run \S+$/), expect.stringMatching(/permission denied for table agent_kit_jobs: `agent-kit migrate` runs as the role that owns .*"Roles, grants and a schema of your own"\)$/),
      ]);
    } finally {
      await empty.drop();
    }
  });

  it.runIf(onPostgres)('say to run `agent-kit migrate` first on a server, and create nothing', async () => {
    const empty = await createEmptyDatabase();
    const env = { ...store.env, DATABASE_URL: empty.url };
    try {
      for (const args of [['enqueue', 'hi'], ['runs'], ['status'], ['show', '00000000-0000-4000-8000-000000000000']]) {
        const result = await cli(args, env);
        expect({ args, code: result.code, stderr: result.stderr.trim() }).toEqual({
          args, code: 1, stderr: expect.stringMatching(/^error: Schema is at 0000; this agent-kit needs \d{4}\. Run `agent-kit migrate` first\.$/),
        });
      }
      const db = await openDb({ databaseUrl: empty.url });
      try {
        const rows = await db.query<{ name: string }>(
          "select tablename as name from pg_tables where schemaname = 'public' and tablename like 'agent_kit_%'");
        expect(rows).toEqual([]);
      } finally {
        await db.close();
      }
    } finally {
      await empty.drop();
    }
  });
});

describe("agent-kit chat's line for a prompt cut to fit the context window (ADR-0067)", () => {
  it('names what was left out, and nothing for a model-retry of another kind', () => {
    expect([
      contextCut({ earlierTurns: { kept: 3, of: 12 } }),
      contextCut({ toolResults: { dropped: 2, of: 5 } }),
      contextCut({ toolResults: { cutTo: 2_800 } }),
      contextCut({ retry: 1, of: 5, delayMs: 1_000 }),
    ]).toEqual([
      'with the newest 3 of 12 earlier turns',
      "without 2 of the turn's 5 answered tool results",
      'with the newest tool results cut to 2800 characters',
      undefined,
    ]);
  });
});
