// Building a Runtime from configuration: open the store, check its schema, resolve the model and
// register the tools. One Runtime serves every segment of a process.
import crypto from 'node:crypto';
import os from 'node:os';
import type { LanguageModel } from 'ai';
import type { AgentKitConfig } from '../config.js';
import { InvalidArgumentError } from '../errors.js';
import { demoTools, resolveModel, type AgentTool } from '../model/index.js';
import type { Db } from '../store/db.js';
import { checkSchema, migrate } from '../store/migrate.js';
import { openDb, storeOptionsFrom } from '../store/open.js';
import type { Runtime, TurnContext } from './types.js';

export interface CreateRuntimeOptions {
  /** Use this store instead of opening one from the config. */
  db?: Db;
  model?: LanguageModel | ((runId: string) => LanguageModel);
  /** Your tools. */
  tools?: Record<string, AgentTool<any, any>>;
  /**
   * Add the demo tools (record_effect, transfer_funds, ask_user). Default: only when you register
   * no tools of your own, so an app's model is never offered a demo `transfer_funds` next to its
   * real tools (an adopter's server, copied from the guide, sent it to a real provider).
   */
  demoTools?: boolean;
  log?: Runtime['log'];
  turnSettings?: Runtime['turnSettings'];
  /** The model's instructions (system prompt), or a function of the turn that returns them. */
  instructions?: Runtime['instructions'];
  /** The most earlier turns of a thread the model is given (the newest); unset: all. */
  historyTurns?: number;
  /** Skip the schema check (the caller migrates first). */
  skipSchemaCheck?: boolean;
  /**
   * Apply pending migrations before the check. Default: on for the embedded store (one process
   * owns it), off for a Postgres server, where deploys must not migrate (run `agent-kit migrate`).
   */
  autoMigrate?: boolean;
}

/**
 * Open the configured store and build a Runtime.
 * @throws SchemaMismatchError when the schema is behind (run `agent-kit migrate`) or ahead by a breaking change.
 */
export async function createRuntime(config: AgentKitConfig, options: CreateRuntimeOptions = {}): Promise<Runtime> {
  // Resolve the model and check the tools before opening anything: a bad setting must not
  // leave a store open.
  const model = options.model ?? resolveModel(config.model);
  const { instructions } = options;
  if (instructions !== undefined && typeof instructions !== 'string' && typeof instructions !== 'function') {
    throw new InvalidArgumentError('instructions must be a string or a function of the turn that returns one');
  }
  const { historyTurns } = options;
  if (historyTurns !== undefined && !(Number.isSafeInteger(historyTurns) && historyTurns >= 0)) {
    throw new InvalidArgumentError(`historyTurns must be a whole number of turns, 0 or more, got ${String(historyTurns)}`);
  }
  for (const [key, tool] of Object.entries(options.tools ?? {})) {
    // The key is the name the model sees and calls; a different `name` would only mislead.
    if (tool?.name !== key) {
      throw new InvalidArgumentError(`the tool registered as "${key}" is named "${String(tool?.name)}": register each tool under its name`);
    }
  }
  const db = options.db ?? (await openDb({ ...storeOptionsFrom(config), log: options.log }));
  try {
    if (options.autoMigrate ?? !config.databaseUrl) await migrate(db);
    if (!options.skipSchemaCheck) await checkSchema(db);
  } catch (error) {
    if (!options.db) await db.close();
    throw error;
  }
  return {
    db,
    model,
    tools: { ...((options.demoTools ?? Object.keys(options.tools ?? {}).length === 0) ? demoTools : {}), ...options.tools },
    config,
    log: options.log,
    turnSettings: options.turnSettings,
    instructions: options.instructions,
    historyTurns: options.historyTurns,
  };
}

let segmentCounter = 0;
const processTag = `${os.hostname()}-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;

/** A unique lease owner name for one segment: role, host, pid, a per-process tag and a counter. */
export function newOwner(role = 'segment'): string {
  segmentCounter += 1;
  return `${role}:${processTag}:${segmentCounter}`;
}

/**
 * The runtime's instructions for this turn ('' for none). A function's answer must be a string;
 * a function that throws or answers anything else fails the segment, as a model error does.
 */
export async function instructionsFor(rt: Runtime, turn: TurnContext): Promise<string> {
  const { instructions } = rt;
  if (instructions === undefined || typeof instructions === 'string') return instructions ?? '';
  const answer: unknown = await instructions(turn);
  if (typeof answer !== 'string') {
    throw new TypeError(`instructions for turn ${turn.turnNo} of thread ${turn.threadId} are not a string: ${typeof answer}`);
  }
  return answer;
}
