// The effect ledger: one record per tool side effect and idempotency key.
export * from './effect-ledger.js';
