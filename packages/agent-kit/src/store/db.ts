// The one door to Postgres: a small interface that both drivers (pg and PGlite) implement,
// so every module above runs the same SQL on a server or on the embedded store.

/** Anything that runs a parameterised statement: the database or an open transaction. */
export interface Queryable {
  /** Run one statement with $1..$n parameters; returns its rows (int8 as number). */
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
}

/** An open transaction: statements, plus multi-statement text for migrations. */
export interface Tx extends Queryable {
  exec(sql: string): Promise<void>;
}

export type DbKind = 'pg' | 'pglite';

export interface Db extends Queryable {
  readonly kind: DbKind;
  /** Run several statements (no parameters), e.g. a migration file. */
  exec(sql: string): Promise<void>;
  /** Run `fn` in one transaction; commit when it resolves, roll back when it throws. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Call `onNotify` for each NOTIFY on `channel`. Resolves to an unsubscribe function.
   * On pg this holds a dedicated connection that reconnects after a loss; callers must still
   * poll at a slow rate, since a notification sent while reconnecting is gone. After any moment
   * it was not listening (connecting, reconnecting), it calls `onNotify('')` once it is again,
   * so a caller can look for what it missed (followEvents relies on this, ADR-0032).
   */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  /** Close every connection. Idempotent. */
  close(): Promise<void>;
}

/** A uuid in its text form (what a uuid column accepts), any case. */
export const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Normalise an int8 that may arrive as string (pg), number or bigint (PGlite) to a number. */
export function toNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  if (typeof value === 'string') return Number(value);
  if (value === null || value === undefined) return 0;
  throw new TypeError(`expected an integer, got ${typeof value}`);
}
