// Build the app when build/ is missing or older than its sources: `npm test` (pretest) and
// `npm start` both run it, so neither serves or tests a stale build. Run directly, it exits
// non-zero when the build fails.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const appDir = dirname(dirname(fileURLToPath(import.meta.url)));
export const serverEntry = join(appDir, 'build', 'index.js');

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

/** Build if stale; returns false (after printing why) when the build failed. */
export function ensureBuild() {
  const libraryEntry = join(appDir, '..', '..', 'packages', 'agent-kit', 'dist', 'index.js');
  if (!existsSync(libraryEntry)) {
    console.error('sveltekit-chat: agent-kit is not built yet; run `npm run build -w agent-kit` first.');
    return false;
  }
  if (!isBuildStale()) return true;
  console.log('sveltekit-chat: build/ is missing or older than the sources; building…');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['run', 'build'], { cwd: appDir, stdio: 'inherit' });
  if (result.status !== 0) {
    console.error(`sveltekit-chat: build failed (exit ${result.status ?? result.signal}).`);
    return false;
  }
  return true;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exit(ensureBuild() ? 0 : 1);
}
