// `npm start`: builds the app when build/ is missing or older than its sources, then runs the
// built server (build/index.js) in this process with PORT 5173 and HOST 127.0.0.1 by default.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const appDir = dirname(dirname(fileURLToPath(import.meta.url)));
const serverEntry = join(appDir, 'build', 'index.js');

// Everything whose change alters the build output. agent-kit is external to the bundle and
// loaded from node_modules at run time, so rebuilding it needs no app rebuild.
const buildInputs = ['src', 'static', 'svelte.config.js', 'vite.config.ts', 'package.json'];

/** Newest modification time (ms) under `path`, or 0 when it does not exist. */
function newestMtimeMs(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of readdirSync(path)) {
    newest = Math.max(newest, newestMtimeMs(join(path, entry)));
  }
  return newest;
}

function isBuildStale() {
  if (!existsSync(serverEntry)) return true;
  const builtAt = statSync(serverEntry).mtimeMs;
  const sourcesAt = Math.max(...buildInputs.map((input) => newestMtimeMs(join(appDir, input))));
  return sourcesAt > builtAt;
}

if (isBuildStale()) {
  console.log('sveltekit-chat: build/ is missing or older than the sources; building…');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['run', 'build'], { cwd: appDir, stdio: 'inherit' });
  if (result.status !== 0) {
    console.error(`sveltekit-chat: build failed (exit ${result.status ?? result.signal}).`);
    process.exit(result.status ?? 1);
  }
}

process.env.PORT ||= '5173';
process.env.HOST ||= '127.0.0.1';
const url = `http://${process.env.HOST}:${process.env.PORT}`;
console.log(`sveltekit-chat: starting build/index.js; open ${url}`);

// Importing the entry runs the server here rather than in a child process: signals reach
// adapter-node's graceful shutdown directly, and no orphan outlives a killed parent.
await import(pathToFileURL(serverEntry).href);
