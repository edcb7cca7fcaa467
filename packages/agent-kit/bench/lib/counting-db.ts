// A Db wrapper that counts round trips by the first words of each statement, so the bench can say
// how many round trips (and, outside transactions, commits) a run costs, and which ones.
import type { Db, Tx } from '../../src/store/db.js';

export interface CountingDb extends Db {
  /** Round trips by statement label (the function called, or the first two words). */
  readonly counts: Map<string, number>;
  /** Transactions opened with `transaction()` (each one more commit). */
  transactions: number;
  reset(): void;
  total(): number;
}

function labelOf(sql: string): string {
  // A claim with its begin (for a fresh run) is a claim.
  if (sql.includes('agent_kit_claim_run(')) return 'agent_kit_claim_run';
  if (sql.includes('agent_kit_claim_due_runs(')) return 'agent_kit_claim_due_runs';
  const fn = /agent_kit_\w+/.exec(sql);
  if (fn) return fn[0];
  return sql.trim().split(/\s+/).slice(0, 2).join(' ').toLowerCase();
}

/** Wrap `db`; every query through the wrapper (and inside its transactions) is counted. */
export function countingDb(db: Db): CountingDb {
  const counts = new Map<string, number>();
  const count = (sql: string) => {
    const label = labelOf(sql);
    counts.set(label, (counts.get(label) ?? 0) + 1);
  };
  const wrapper: CountingDb = {
    kind: db.kind,
    counts,
    transactions: 0,
    query(sql, params) {
      count(sql);
      return db.query(sql, params);
    },
    exec(sql) {
      count(sql);
      return db.exec(sql);
    },
    transaction(fn) {
      wrapper.transactions++;
      return db.transaction((tx) => {
        const counted: Tx = {
          query: (sql, params) => (count(sql), tx.query(sql, params)),
          exec: (sql) => (count(sql), tx.exec(sql)),
        };
        return fn(counted);
      });
    },
    listen: (channel, onNotify) => db.listen(channel, onNotify),
    close: () => db.close(),
    reset() {
      counts.clear();
      wrapper.transactions = 0;
    },
    total() {
      let sum = 0;
      for (const n of counts.values()) sum += n;
      return sum;
    },
  };
  return wrapper;
}
