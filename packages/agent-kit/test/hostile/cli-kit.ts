// The real command line for the hostile CLI suite: a build of src/ into a private folder (keyed
// by a hash of the sources, so both store passes and concurrent runs share one build and never
// race `dist/`), a store of its own seeded with another owner's thread, spawns of
// `node bin/agent-kit.js` bounded in time, and a snapshot of the store between spawns.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTurn, type StartTurnResult } from '../../src/queue/start-turn.js';
import { openDb } from '../../src/store/open.js';
import type { Db } from '../../src/store/db.js';
import { wrapPglite } from '../../src/store/pglite-driver.js';
import {
  adminQuery, databasePrefix, onPostgres, pgliteFromTemplate, templateName, urlForDatabase,
} from '../harness/test-db.js';
import { snapshotTables } from './hostile-kit.js';

export const packageDir = fileURLToPath(new URL('../../', import.meta.url));

function listSources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return listSources(full);
    return /\.ts$/.test(entry.name) && !/\.test\.ts$/.test(entry.name) ? [full] : [];
  }).sort();
}

/**
 * Build the CLI from src/ (tsc -p tsconfig.build.json) into .scratch-hostile-cli/<hash>/ with
 * a copy of bin/agent-kit.js and a link to sql/; reuse it while the sources are unchanged.
 * @returns the path of the built bin/agent-kit.js
 */
export async function buildCli(): Promise<string> {
  const hash = crypto.createHash('sha256');
  const configs = ['tsconfig.json', 'tsconfig.build.json', 'bin/agent-kit.js', 'package.json'];
  const inputs = [...listSources(path.join(packageDir, 'src')), ...configs]
    .map((f) => path.resolve(packageDir, f));
  for (const file of inputs) hash.update(file).update(fs.readFileSync(file));
  const root = path.join(packageDir, '.scratch-hostile-cli');
  const dir = path.join(root, hash.digest('hex').slice(0, 16));
  const bin = path.join(dir, 'bin', 'agent-kit.js');
  if (fs.existsSync(bin)) return bin;
  // One tsc per source hash: a second test file (another worker, or a concurrent run) waits for
  // the build under way instead of running tsc beside it on the same CPUs.
  fs.mkdirSync(root, { recursive: true });
  const lock = `${dir}.lock`;
  const waitedFromMs = Date.now();
  while (!takeBuildLock(lock)) {
    if (fs.existsSync(bin)) return bin;
    if (Date.now() - waitedFromMs > 300_000) throw new Error(`waited 300 s for the CLI build holding ${lock}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  try {
    if (!fs.existsSync(bin)) await buildInto(dir);
  } finally {
    fs.rmSync(lock, { force: true });
  }
  // Drop builds of older sources, once no run can still be using them.
  for (const old of fs.readdirSync(root)) {
    const full = path.join(root, old);
    if (full !== dir && full !== lock && Date.now() - fs.statSync(full).mtimeMs > 3_600_000) {
      fs.rmSync(full, { recursive: true, force: true });
    }
  }
  return bin;
}

/** Take the build lock (a file holding our pid), or false while a live process holds it. */
function takeBuildLock(lock: string): boolean {
  try {
    fs.writeFileSync(lock, String(process.pid), { flag: 'wx' });
    return true;
  } catch (raw) {
    if ((raw as NodeJS.ErrnoException).code !== 'EEXIST') throw raw;
  }
  let holder = 0;
  try {
    holder = Number(fs.readFileSync(lock, 'utf8').trim());
  } catch {
    return false; // released just now: take it on the next try
  }
  if (!holder) return false; // being written
  try {
    process.kill(holder, 0);
    return false;
  } catch (raw) {
    if ((raw as NodeJS.ErrnoException).code === 'EPERM') return false;
  }
  fs.rmSync(lock, { force: true }); // its builder was killed
  return false;
}

/** tsc the CLI into a private folder, then rename it to `dir` whole. */
async function buildInto(dir: string): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  // tsc exits non-zero on a type error elsewhere in src/ but still emits; the CLI is what counts.
  await run(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', path.join(tmp, 'dist')],
    { cwd: packageDir, timeoutMs: 240_000 });
  if (!fs.existsSync(path.join(tmp, 'dist', 'cli', 'main.js'))) throw new Error(`tsc built no CLI in ${tmp}`);
  fs.mkdirSync(path.join(tmp, 'bin'));
  fs.copyFileSync(path.join(packageDir, 'bin', 'agent-kit.js'), path.join(tmp, 'bin', 'agent-kit.js'));
  fs.copyFileSync(path.join(packageDir, 'package.json'), path.join(tmp, 'package.json')); // --version reads it
  fs.symlinkSync(path.join(packageDir, 'sql'), path.join(tmp, 'sql'));
  try {
    fs.renameSync(tmp, dir);
  } catch {
    fs.rmSync(tmp, { recursive: true, force: true }); // another run built it first
  }
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Killed at the deadline: the command hung. */
  timedOut: boolean;
  ms: number;
}

/** Run a program to its end or its deadline (then SIGKILL). */
export function run(
  file: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<RunResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(file, args, {
      cwd: options.cwd, env: options.env, timeout: options.timeoutMs, killSignal: 'SIGKILL',
      maxBuffer: 8 * 1024 * 1024,
    }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
      const timedOut = Boolean(error && (error as { killed?: boolean }).killed);
      resolve({ code, stdout: String(stdout), stderr: String(stderr), timedOut, ms: Date.now() - started });
    });
  });
}

export interface CliStore {
  /** Environment for the CLI: DATABASE_URL or AGENT_KIT_DATA_DIR, nothing else of ours. */
  env: NodeJS.ProcessEnv;
  /** Alice's thread and its queued run: another owner's, for the default `local` owner. */
  alice: StartTurnResult;
  snapshot(): Promise<Record<string, string>>;
  /**
   * An embedded store's copy: its folder copied while no process has it open (the same rows,
   * the same snapshot), so commands can run on the copy and the original at once. Undefined
   * on Postgres, where commands can share one database.
   */
  copy?: () => CliStore;
  close(): Promise<void>;
}

/** A clean environment: this process's, less any agent-kit or database setting. */
function baseEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env)
    .filter(([name]) => !name.startsWith('AGENT_KIT_') && name !== 'DATABASE_URL'));
}

/**
 * A migrated store of the CLI's own with one thread of alice's: a fresh Postgres database when
 * DATABASE_URL is set, else an embedded folder. The embedded store is opened only between spawns.
 */
export async function openCliStore(): Promise<CliStore> {
  if (onPostgres) {
    const name = `${databasePrefix}cli_${crypto.randomBytes(5).toString('hex')}`;
    await adminQuery(`create database ${name} template ${templateName}`);
    const url = urlForDatabase(name);
    const db = await openDb({ databaseUrl: url, poolMax: 1 });
    const alice = await startTurn(db, { ownerId: 'alice', text: 'a thread of alice' });
    return {
      env: { ...baseEnv(), DATABASE_URL: url }, alice,
      snapshot: () => snapshotTables(db),
      async close() {
        await db.close();
        await adminQuery(`drop database if exists ${name} with (force)`).catch(() => {});
      },
    };
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-kit-hostile-cli-'));
  // The store (its pgdata/, as openDb lays it out) starts as a copy of the run's migrated
  // template: no initdb, no migrating here.
  const seeded = wrapPglite(await pgliteFromTemplate('migrated', path.join(dataDir, 'pgdata')));
  let alice: StartTurnResult;
  try {
    alice = await startTurn(seeded, { ownerId: 'alice', text: 'a thread of alice' });
  } finally {
    await seeded.close();
  }
  return embeddedStore(dataDir, alice);
}

/** The CliStore of an embedded folder (opened only between spawns, to snapshot it). */
function embeddedStore(dataDir: string, alice: StartTurnResult): CliStore {
  const withStore = async <T>(fn: (db: Db) => Promise<T>) => {
    const db = await openDb({ dataDir });
    try {
      return await fn(db);
    } finally {
      await db.close();
    }
  };
  return {
    env: { ...baseEnv(), AGENT_KIT_DATA_DIR: dataDir }, alice,
    snapshot: () => withStore((db) => snapshotTables(db)),
    copy() {
      const copyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-kit-hostile-cli-'));
      fs.cpSync(dataDir, copyDir, { recursive: true });
      return embeddedStore(copyDir, alice);
    },
    async close() {
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
