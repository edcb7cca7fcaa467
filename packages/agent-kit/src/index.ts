// agent-kit's public API: durable AI-agent turns on plain PostgreSQL. Explicit named exports only.
export * from './errors.js';
export * from './config.js';
export * from './store/index.js';
export * from './lease/index.js';
export { startTurn, maxMessageChars, type StartTurnOptions, type StartTurnResult } from './queue/start-turn.js';
