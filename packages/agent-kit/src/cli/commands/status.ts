// `agent-kit status [--json] [--check] [--stale SECONDS]`: is work moving, and does anything need
// a person? The runs in flight by status, the reaper's backlog (expired leases), the drains'
// backlog (due jobs), the effects in doubt, and what to do about each that has waited too long.
// With --check it exits 1 when anything needs attention, 3 when it cannot read the store, for a
// monitor or a cron health check.
import path from 'node:path';
import { type Command, CommanderError } from 'commander';
import type { AgentKitConfig } from '../../config.js';
import { coerceError } from '../../errors.js';
import { defaultStaleMs, maxStaleSeconds, parseStaleSeconds, readStoreStatus, statusAlerts, type LastPass, type StatusAlert, type StoreStatus } from '../../event-log/read-status.js';
import type { Queryable } from '../../store/db.js';
import { withDb } from '../main.js';

export interface StatusOptions {
  json?: boolean;
  /** Exit 1 when anything needs attention, 3 when the store cannot be read. */
  check?: boolean;
  /** Seconds an expired lease or a due job may wait before it needs attention. */
  stale?: number;
  /** Which store was read (describeStore), said first: a monitor without DATABASE_URL reads an empty embedded one. */
  store?: string;
}

/**
 * The store a command reads, for people: the server and database of DATABASE_URL (never its
 * user or password), or the embedded store's folder.
 */
export function describeStore(
  config: Pick<AgentKitConfig, 'databaseUrl' | 'dataDir'>, defaultDataDir: string, schema?: string | null,
): string {
  if (!config.databaseUrl) {
    const dir = config.dataDir ?? defaultDataDir;
    return `embedded, ${dir === 'memory' ? 'in memory' : path.resolve(dir)} (DATABASE_URL is not set)`;
  }
  // The schema the connection's search_path gives: a pooler that dropped a search_path set in the
  // URL's options shows here as "public" instead of the schema meant.
  const inSchema = schema === undefined ? '' : schema === null ? ', no schema on the search_path' : `, schema ${schema}`;
  try {
    const url = new URL(config.databaseUrl);
    return `postgres, ${url.host || 'local socket'}${url.pathname}${inSchema}`;
  } catch {
    return `postgres${inSchema}`;
  }
}

/** The connection's current schema, where agent-kit's tables are read and made. */
export async function currentSchema(db: Queryable): Promise<string | null> {
  const [row] = await db.query<{ schema: string | null }>('select current_schema() as schema');
  return row?.schema ?? null;
}

export function register(program: Command) {
  program
    .command('status')
    .description('runs in flight, expired leases, due jobs and effects in doubt, and what needs attention')
    .option('--json', 'print one JSON object instead of text')
    .option('--check', 'exit 1 when anything needs attention, 3 when the store cannot be read (for a monitor)')
    .option('--stale <seconds>', `how long an expired lease or a due job may wait (1..${maxStaleSeconds}, default ${defaultStaleMs / 1000})`,
      (value) => {
        const seconds = parseStaleSeconds(value);
        if (seconds === null) {
          throw new CommanderError(2, 'agent-kit.invalidArgument', `--stale takes whole seconds 1..${maxStaleSeconds}, got "${value}"`);
        }
        return seconds;
      })
    .action(async (options: StatusOptions) => {
      const [{ configFromEnv }, { defaultDataDir }] = await Promise.all([import('../../config.js'), import('../../store/open.js')]);
      const read = async () => {
        const config = configFromEnv();
        return withDb(async (db) => formatStatusCommand(db, {
          ...options, store: describeStore(config, defaultDataDir, config.databaseUrl ? await currentSchema(db) : undefined),
        }));
      };
      // A monitor tells "something needs attention" (1) from "the check could not look" (3).
      const { text, alerts } = options.check
        ? await read().catch((error: unknown) => {
          throw new CommanderError(3, 'agent-kit.statusUnknown', `could not read the store: ${coerceError(error).message}`);
        })
        : await read();
      process.stdout.write(text);
      if (options.check && alerts.length > 0) {
        const what = alerts.length === 1 ? '1 thing needs' : `${alerts.length} things need`;
        throw new CommanderError(1, 'agent-kit.statusCheck', `${what} attention`);
      }
    });
}

/** The command's whole output for a store, and the alerts it found. */
export async function formatStatusCommand(db: Queryable, options: StatusOptions): Promise<{ text: string; alerts: StatusAlert[] }> {
  const status = await readStoreStatus(db);
  const alerts = statusAlerts(status, (options.stale ?? defaultStaleMs / 1000) * 1000);
  const store = options.store === undefined ? {} : { store: options.store };
  if (options.json) return { text: `${JSON.stringify({ ...store, ...status, alerts }, null, 2)}\n`, alerts };
  return { text: (options.store === undefined ? '' : `store     ${options.store}\n`) + formatStatus(status, alerts), alerts };
}

const num = (n: number) => n.toLocaleString('en-US');
const count = (n: number, one: string, many = `${one}s`) => `${num(n)} ${n === 1 ? one : many}`;
const seconds = (ms: number) => (ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${num(Math.round(ms / 1000))} s`);

const passText = (pass: LastPass | null) => (pass === null ? 'no pass recorded' : `last looked ${seconds(pass.agoMs)} ago (${pass.owner})`);

/** Of the runs started in the last hour: how many failed, and how many were salvaged. */
function failures({ failed, salvaged }: StoreStatus['lastHour']): string {
  if (failed + salvaged === 0) return 'none in the runs started in the last hour';
  const said = [failed > 0 ? `${num(failed)} failed` : '', salvaged > 0 ? `${num(salvaged)} salvaged (given up after their crash budget)` : '']
    .filter(Boolean).join(', ');
  const list = [failed > 0 ? 'failed' : '', salvaged > 0 ? 'aborted' : ''].filter(Boolean).map((s) => `agent-kit runs --status ${s}`);
  return `${said}, of the runs started in the last hour: ${list.join(' and ')}, then show`;
}

function formatStatus(status: StoreStatus, alerts: StatusAlert[]): string {
  const { runs, expiredLeases, dueJobs, inDoubt } = status;
  const lines = [
    `runs      ${num(runs.queued)} queued, ${num(runs.running)} running, ${num(runs.waitingInput)} waiting for input, `
      + `${num(runs.waitingTakeover)} waiting for takeover`,
    `leases    ${expiredLeases.count === 0 ? 'none expired'
      : `${count(expiredLeases.count, 'expired lease')}, the oldest ${seconds(expiredLeases.oldestMs ?? 0)} ago`}`,
    `jobs      ${dueJobs.count === 0 ? 'none due'
      : `${count(dueJobs.count, 'job')} due, the oldest for ${seconds(dueJobs.oldestMs ?? 0)}`}`,
    `in doubt  ${inDoubt.effects === 0 ? 'no effects' : `${count(inDoubt.effects, 'effect')} in ${count(inDoubt.runs, 'run')}`}`,
    `failures  ${failures(status.lastHour)}`,
    `drain     ${passText(status.lastPass.drain)}`,
    `reaper    ${passText(status.lastPass.reap)}`,
  ];
  lines.push(alerts.length === 0 ? 'nothing needs attention' : 'needs attention:', ...alerts.map((a) => `  - ${a.message}`));
  return `${lines.join('\n')}\n`;
}
