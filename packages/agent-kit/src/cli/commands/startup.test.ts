// What the built CLI loads before it refuses a usage error or prints help: commander and the
// command registrations, not the store drivers, zod, the AI SDK or the turn runtime (each command
// imports those in its action). Every spawn in the CLI suites paid ~0.3 s of CPU for them before.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, run } from '../../../test/hostile/cli-kit.js';

let bin: string;
let hookDir: string;
beforeAll(async () => {
  bin = await buildCli();
  // A module hook that names on stderr every module loaded through import.
  hookDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-kit-startup-'));
  fs.writeFileSync(path.join(hookDir, 'hooks.mjs'),
    'export async function load(url, context, next) { process.stderr.write(`loaded ${url}\\n`); return next(url, context); }\n');
  fs.writeFileSync(path.join(hookDir, 'register.mjs'),
    "import { register } from 'node:module'; register('./hooks.mjs', import.meta.url);\n");
}, 300_000);
afterAll(() => {
  if (hookDir) fs.rmSync(hookDir, { recursive: true, force: true });
});

const heavy = /\/node_modules\/(zod|pg|pg-[^/]+|@electric-sql|ai|@ai-sdk|@opentelemetry)\/|\/dist\/(turn|model|queue|worker|reaper|effect-ledger|config\.js|store\/(open|migrate|pg-driver|pglite-driver))/;

async function loadedBy(args: string[]) {
  const result = await run(process.execPath, ['--import', path.join(hookDir, 'register.mjs'), bin, ...args], {
    env: { PATH: process.env.PATH }, timeoutMs: 60_000,
  });
  const lines = result.stderr.split('\n');
  const loaded = lines.filter((l) => l.startsWith('loaded ')).map((l) => l.slice('loaded '.length));
  return { code: result.code, loaded, stderr: lines.filter((l) => l && !l.startsWith('loaded ')).join('\n') };
}

describe('agent-kit startup', () => {
  it('refuses a usage error without loading the store, config or runtime modules', async () => {
    const { code, loaded, stderr } = await loadedBy(['runs', '--status', 'bogus']);
    expect(code).toBe(2);
    expect(stderr).toMatch(/^error: --status takes one of /);
    expect(loaded.some((url) => url.includes('/dist/cli/commands/'))).toBe(true); // the hook saw the commands
    expect(loaded.filter((url) => heavy.test(url))).toEqual([]);
  });

  it('prints its version, the package.json one, without them', async () => {
    const { version } = JSON.parse(fs.readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    for (const flag of ['--version', '-V']) {
      const result = await run(process.execPath, [bin, flag], { env: { PATH: process.env.PATH }, timeoutMs: 60_000 });
      expect([result.code, result.stdout, result.stderr]).toEqual([0, `${version}\n`, '']);
    }
    const { loaded } = await loadedBy(['--version']);
    expect(loaded.filter((url) => heavy.test(url))).toEqual([]);
  });

  it('prints help without them', async () => {
    const { code, loaded } = await loadedBy(['--help']);
    expect(code).toBe(0);
    expect(loaded.filter((url) => heavy.test(url))).toEqual([]);
  });
});
