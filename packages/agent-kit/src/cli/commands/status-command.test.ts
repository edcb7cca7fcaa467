// `agent-kit status --check` as a monitor runs it, the built CLI on both stores: exit 0 while
// nothing waits past --stale, exit 1 (the status on stdout, one line on stderr) once something
// does, and the store untouched either way; exit 3 when it cannot read the store at all.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, openCliStore, packageDir, run, type CliStore } from '../../../test/hostile/cli-kit.js';
import { describeStore } from './status.js';

let bin: string;
let store: CliStore;
beforeAll(async () => {
  [bin, store] = await Promise.all([buildCli(), openCliStore()]);
}, 300_000);
afterAll(async () => {
  await store?.close();
});

const status = (...args: string[]) =>
  run(process.execPath, [bin, 'status', ...args], { cwd: packageDir, env: store.env, timeoutMs: 60_000 });

describe('agent-kit status --check', () => {
  it('exits 0 while the one due job is younger than --stale, 1 once it is older, writing nothing', async () => {
    const before = await store.snapshot();
    const fresh = await status('--check');
    expect([fresh.code, fresh.stderr]).toEqual([0, '']);
    // Which store it read comes first: a monitor without DATABASE_URL reads an embedded one.
    const where = store.env.DATABASE_URL
      ? `postgres, ${new URL(store.env.DATABASE_URL).host}${new URL(store.env.DATABASE_URL).pathname}, schema public`
      : `embedded, ${store.env.AGENT_KIT_DATA_DIR} (DATABASE_URL is not set)`;
    expect(fresh.stdout.split('\n')[0]).toBe(`store     ${where}`);
    expect(fresh.stdout).toMatch(/\nruns {6}1 queued, 0 running, 0 waiting for input, 0 waiting for takeover\n/);
    expect(fresh.stdout).toMatch(/\njobs {6}1 job due, the oldest for \d+(\.\d)? s\n/);
    expect(fresh.stdout).toMatch(/\nnothing needs attention\n$/);

    // Alice's job has been due since the store was seeded; let a second pass for --stale 1.
    await new Promise((r) => setTimeout(r, 1_100));
    const stale = await status('--check', '--stale', '1');
    expect(stale.code, stale.stderr).toBe(1);
    expect(stale.stderr).toBe('error: 1 thing needs attention\n');
    expect(stale.stdout).toMatch(/\nneeds attention:\n {2}- a job has been due for \d+(\.\d)? s, and no drain pass is recorded: is a drain running /);
    expect(stale.stdout).toMatch(/\ndrain {5}no pass recorded\nreaper {4}no pass recorded\n/);

    const json = await status('--json', '--stale', '1');
    expect(json.code).toBe(0); // without --check, the status is an answer, not a verdict
    expect(JSON.parse(json.stdout)).toMatchObject({ store: where, runs: { queued: 1 }, dueJobs: { count: 1 }, alerts: [{ kind: 'drain-behind' }] });
    expect(await store.snapshot()).toEqual(before);
  }, 120_000);

  it('exits 3 when it cannot read the store, apart from "needs attention"', async () => {
    const env = { ...store.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' };
    const down = await run(process.execPath, [bin, 'status', '--check'], { cwd: packageDir, env, timeoutMs: 60_000 });
    expect(down.code, down.stderr).toBe(3);
    expect(down.stderr).toMatch(/^error: could not read the store: .*ECONNREFUSED/);
    expect(down.stdout).toBe('');
    // Without --check, a failure to read is a failure like any other command's.
    const plain = await run(process.execPath, [bin, 'status'], { cwd: packageDir, env, timeoutMs: 60_000 });
    expect(plain.code).toBe(1);
  }, 120_000);
});

describe('describeStore', () => {
  it("names DATABASE_URL's server and database, never its user or password, or the embedded store's folder", () => {
    expect(describeStore({ databaseUrl: 'postgres://app:s3cret@db.example.com:6543/chat?sslmode=require' }, '.agent-kit'))
      .toBe('postgres, db.example.com:6543/chat');
    expect(describeStore({ databaseUrl: 'postgresql:///chat?host=/var/run/postgresql' }, '.agent-kit')).toBe('postgres, local socket/chat');
    expect(describeStore({ databaseUrl: 'not a url' }, '.agent-kit')).toBe('postgres');
    // The schema the connection's search_path gave, when read (a pooler may drop one set in the URL).
    expect(describeStore({ databaseUrl: 'postgres://db.example.com/chat' }, '.agent-kit', 'agent')).toBe('postgres, db.example.com/chat, schema agent');
    expect(describeStore({ databaseUrl: 'postgres://db.example.com/chat' }, '.agent-kit', null))
      .toBe('postgres, db.example.com/chat, no schema on the search_path');
    expect(describeStore({}, '.agent-kit')).toBe(`embedded, ${path.resolve('.agent-kit')} (DATABASE_URL is not set)`);
    expect(describeStore({ dataDir: 'memory' }, '.agent-kit')).toBe('embedded, in memory (DATABASE_URL is not set)');
  });
});
