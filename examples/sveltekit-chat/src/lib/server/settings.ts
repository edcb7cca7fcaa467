// The app's own settings on top of agent-kit's configFromEnv: demo-friendly defaults (visible
// streaming, fast takeover), the embedded store's folder and the operator list. The defaults are
// written into process.env before the library reads it, so one set of names configures both.
import path from 'node:path';

/**
 * Defaults the reference app applies when a variable is unset. They make the demo watchable:
 * the scripted model streams a word every 40 ms (60 words ≈ 2.4 s), and a 5 s lease lets a
 * visitor see a takeover a few seconds after they kill a segment. Production sets its own.
 */
export const demoEnvDefaults: Readonly<Record<string, string>> = {
  AGENT_KIT_SCRIPTED_DELAY_MS: '40',
  AGENT_KIT_SCRIPTED_TOKENS: '60',
  AGENT_KIT_LEASE_TTL: '5',
};

/** Fill unset (or empty) variables in `env` with the demo defaults. */
export function applyDemoDefaults(env: NodeJS.ProcessEnv = process.env): void {
  for (const [name, value] of Object.entries(demoEnvDefaults)) {
    if (env[name] === undefined || env[name] === '') env[name] = value;
  }
}

/**
 * The app's data folder: the embedded store (<dir>/pgdata) and the generated session secret.
 * AGENT_KIT_DATA_DIR wins; else ./.agent-kit in the working directory, like the agent-kit CLI
 * (scripts/start.js points it at the folder `npm start` was run from).
 */
export function resolveDataDir(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.AGENT_KIT_DATA_DIR?.trim();
  return path.resolve(configured ? configured : '.agent-kit');
}

/** Operators by configuration: AGENT_KIT_OPERATORS is a comma list of user names. */
export function readOperators(env: NodeJS.ProcessEnv = process.env): Set<string> {
  const raw = env.AGENT_KIT_OPERATORS ?? 'operator';
  return new Set(raw.split(',').map((name) => name.trim()).filter((name) => name !== ''));
}

/** Run migrations at startup: always on the embedded store, on a server only when asked. */
export function shouldAutoMigrate(env: NodeJS.ProcessEnv = process.env): boolean {
  return !env.DATABASE_URL || env.AGENT_KIT_AUTO_MIGRATE === '1';
}

/** Demo controls (/api/demo/*) are on unless AGENT_KIT_DEMO_CONTROLS=0. */
export function demoControlsEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.AGENT_KIT_DEMO_CONTROLS !== '0';
}
