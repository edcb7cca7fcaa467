// Real Postgres through a pooled `pg` client. Connection loss surfaces as StoreUnavailableError;
// the pool drops broken clients and opens new ones when the server is back.
import crypto from 'node:crypto';
import type { ConnectionOptions } from 'node:tls';
import pg from 'pg';
import { coerceError } from '../errors.js';
import type { Db, Tx } from './db.js';

// int8 (oid 20) as a JS number: fences, seqs and counters stay far below 2^53.
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
};

export interface PgDbOptions {
  connectionString: string;
  /** Pool size; serverless callers want 1–2, long-lived workers more. */
  max?: number;
  /** Per-statement timeout in milliseconds (0 = none). */
  statementTimeoutMs?: number;
  applicationName?: string;
  /**
   * How long a statement may wait for a connection (a free one from the pool, or a new one)
   * before it fails with StoreUnavailableError; default 10 s. A process that runs more work at
   * once than its pool serves queues here.
   */
  acquireTimeoutMs?: number;
  /**
   * How often a LISTEN connection proves it is alive with a round trip (default 30 s). One that
   * does not answer within the same time is dropped and opened again, so a connection that died
   * without a word (a NAT or load balancer that forgot it) is noticed in one to two periods
   * instead of when TCP gives up, which can be hours; its viewers poll meanwhile (ADR-0039).
   */
  listenHeartbeatMs?: number;
  /**
   * TLS to the server, for a CA given in code rather than as a file: `{ ca: pemText }`, or `true`
   * for the system's CAs. The connection string's own `sslmode`/`sslrootcert` parameters, when
   * present, take precedence (as in `pg`); see the operating guide's "TLS to a hosted Postgres".
   */
  ssl?: boolean | ConnectionOptions;
  /**
   * Where LISTEN connects, when not `connectionString`: a direct or session-mode URL of the same
   * database, for an app whose statements go through a pooler in transaction mode (PgBouncer,
   * Supavisor on port 6543). Through such a pooler LISTEN is accepted and then hears nothing.
   */
  listenConnectionString?: string;
  /**
   * How long a LISTEN connection waits for a notification it sent itself through the pool (at
   * connect and at each heartbeat) before it is said not to hear; default 5 s (ADR-0106).
   */
  listenProbeMs?: number;
  /** Told when LISTEN stops or starts hearing the database's notifications (ADR-0106). */
  log?: (entry: Record<string, unknown>) => void;
}

const defaultListenHeartbeatMs = 30_000;
const defaultListenProbeMs = 5_000;

async function run<T>(client: pg.Pool | pg.PoolClient, sql: string, params?: readonly unknown[]) {
  try {
    const query = () => client.query({ text: sql, values: params as unknown[] | undefined, types });
    // (A client of a transaction holds its connection already: only the pool's statements connect.)
    const result = await (client instanceof pg.Pool ? whenAdmitted(query) : query());
    return result.rows as T[];
  } catch (raw) {
    throw coerceError(raw);
  }
}

/**
 * Codes a server gives a connection it will not take now (too many connections for the role or
 * the server; starting up). They come before any statement was sent, so asking again is always
 * safe; failing at once spent a run's attempt on a pool that was only over a connection limit.
 */
const notAdmittedCodes = new Set(['53300', '57P03']);
/** Waits between the tries of a connection the server would not take: about 4.5 s in all. */
const admissionWaitsMs = [50, 100, 200, 400, 800, 1_000, 1_000, 1_000];
/** And no try starts later than this after the first (each may also wait in the pool's queue). */
const admissionLimitMs = 5_000;

async function whenAdmitted<T>(connect: () => Promise<T>): Promise<T> {
  const startedMs = performance.now();
  for (let tried = 0; ; tried++) {
    try {
      return await connect();
    } catch (raw) {
      const code = (raw as { code?: unknown } | null)?.code;
      const waitMs = admissionWaitsMs[tried];
      if (waitMs === undefined || typeof code !== 'string' || !notAdmittedCodes.has(code)
        || performance.now() - startedMs + waitMs > admissionLimitMs) throw raw;
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}

/** Open a pooled connection to a Postgres server. */
export function openPgDb(options: PgDbOptions): Db {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    ssl: options.ssl,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'agent-kit',
    statement_timeout: options.statementTimeoutMs || undefined,
    connectionTimeoutMillis: options.acquireTimeoutMs ?? 10_000,
    idleTimeoutMillis: 10_000,
  });
  // An idle client that loses its connection emits here; without a listener it would crash the process.
  pool.on('error', () => {});
  let closed = false;
  const listeners = new Set<() => Promise<void>>();

  const db: Db = {
    kind: 'pg',
    query: (sql, params) => run(pool, sql, params),
    async exec(sql) {
      await run(pool, sql);
    },
    async transaction(fn) {
      let client: pg.PoolClient;
      try {
        client = await whenAdmitted(() => pool.connect());
      } catch (raw) {
        throw coerceError(raw);
      }
      // pg-pool stops listening for errors on a client it hands out: a connection that dies
      // between two statements would emit an unhandled 'error' and kill the process.
      let lostConnection: unknown;
      const onError = (raw: unknown) => {
        lostConnection = raw;
      };
      client.on('error', onError);
      const tx: Tx = {
        query: (sql, params) => run(client, sql, params),
        exec: async (sql) => {
          await run(client, sql);
        },
      };
      let broken = false;
      try {
        await run(client, 'begin');
        const value = await fn(tx);
        await run(client, 'commit');
        return value;
      } catch (raw) {
        try {
          await client.query('rollback');
        } catch {
          broken = true; // the connection is gone; do not return it to the pool
        }
        throw coerceError(raw);
      } finally {
        const discard = broken || lostConnection !== undefined;
        if (!discard) client.off('error', onError);
        client.release(discard ? true : undefined);
      }
    },
    async listen(channel, onNotify) {
      // The probe goes the way the app's own notifications go: through the pool.
      const notify = (probe: string, payload: string) => run(pool, 'select pg_notify($1, $2)', [probe, payload]).then(() => {});
      const stop = listenWithReconnect(options, channel, onNotify, notify);
      listeners.add(stop);
      return async () => {
        listeners.delete(stop);
        await stop();
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([...listeners].map((stop) => stop()));
      await pool.end();
    },
  };
  return db;
}

/**
 * A dedicated LISTEN connection that reconnects with backoff until stopped. It also proves that
 * it hears (ADR-0106): at connect and at each heartbeat it sends a notification on a channel of
 * its own through the pool, and says so, once per change, when that does not come back. LISTEN
 * through a pooler in transaction mode is accepted and then hears nothing; the callers poll
 * meanwhile, but without this no one would know why work waits for the poll.
 */
function listenWithReconnect(
  options: PgDbOptions, channel: string, onNotify: (p: string) => void, notify: (channel: string, payload: string) => Promise<void>,
) {
  let stopped = false;
  let client: pg.Client | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let backoffMs = 100;
  const heartbeatMs = options.listenHeartbeatMs ?? defaultListenHeartbeatMs;
  let heartbeat: NodeJS.Timeout | undefined;
  const probeChannel = `agent_kit_probe_${crypto.randomBytes(6).toString('hex')}`;
  const probeMs = options.listenProbeMs ?? defaultListenProbeMs;
  let probeTimer: NodeJS.Timeout | undefined;
  let probes = 0; // sent so far; each carries its number, so a late one is never taken for the next
  let awaited = 0; // the probe awaited now, 0 for none
  let hears: boolean | undefined; // unknown until a first probe comes back or does not
  let connectFailing = false;

  const probe = () => {
    if (awaited !== 0 || stopped) return;
    const sent = ++probes;
    awaited = sent;
    // Timed from the notification's commit, not from its wait for a pooled connection; a server
    // that cannot be reached gives no verdict (the reconnects deal with it).
    notify(probeChannel, String(sent)).then(() => {
      if (awaited !== sent || stopped) return; // it came back before the commit's answer did
      probeTimer = setTimeout(() => {
        if (awaited !== sent || stopped) return;
        awaited = 0;
        if (hears !== false) {
          options.log?.({
            msg: `LISTEN on ${channel} did not hear its own notification within ${probeMs} ms: notifications do not `
              + 'reach this process, which polls instead. Through a pooler in transaction mode (PgBouncer, Supavisor on '
              + 'port 6543) LISTEN is accepted and hears nothing: set AGENT_KIT_LISTEN_URL to a direct or session-mode URL '
              + 'of the same database',
            channel,
          });
        }
        hears = false;
      }, probeMs);
      probeTimer.unref();
    }, () => {
      if (awaited === sent) endProbe();
    });
  };
  const endProbe = () => {
    awaited = 0;
    clearTimeout(probeTimer);
  };
  const heardProbe = (payload: string) => {
    // Late (after its verdict, or from before a reconnect): the next heartbeat's probe tells.
    if (awaited === 0 || payload !== String(awaited)) return;
    endProbe();
    if (hears === false) options.log?.({ msg: `LISTEN on ${channel} hears notifications again`, channel });
    hears = true;
  };
  /** A LISTEN that cannot connect (a wrong AGENT_KIT_LISTEN_URL) says so once, and once when it can. */
  const connected = (error?: unknown) => {
    if (error === undefined) {
      if (connectFailing) options.log?.({ msg: `LISTEN on ${channel} connected`, channel });
      connectFailing = false;
      return;
    }
    if (connectFailing || stopped) return;
    connectFailing = true;
    options.log?.({
      msg: `LISTEN on ${channel} could not connect (${coerceError(error).message}): trying again with backoff; `
        + 'notifications do not reach this process meanwhile, which polls instead',
      channel,
    });
  };

  const connect = async () => {
    if (stopped) return;
    const next = new pg.Client({
      connectionString: options.listenConnectionString ?? options.connectionString, ssl: options.ssl,
      application_name: 'agent-kit-listen', keepAlive: true, keepAliveInitialDelayMillis: heartbeatMs,
    });
    next.on('notification', (message) => {
      if (message.channel === channel) onNotify(message.payload ?? '');
      else if (message.channel === probeChannel) heardProbe(message.payload ?? '');
    });
    next.on('error', () => scheduleReconnect());
    next.on('end', () => scheduleReconnect());
    client = next;
    try {
      await next.connect();
      await next.query(`listen "${channel.replace(/"/g, '""')}"`);
      await next.query(`listen "${probeChannel}"`);
      connected();
      backoffMs = 100;
      beatWhileAlive(next);
      probe();
      // A reconnect may have missed notifications: tell the caller to look now.
      onNotify('');
    } catch (error) {
      connected(error);
      scheduleReconnect();
    }
  };
  /** Every period, a round trip that must come back within the next one, or the client is dropped. */
  const beatWhileAlive = (listening: pg.Client) => {
    let answered = true;
    heartbeat = setInterval(() => {
      if (client !== listening) return;
      if (!answered) {
        scheduleReconnect();
        return;
      }
      answered = false;
      listening.query('select 1').then(() => {
        answered = true;
        // Only once the round trip is over: through PgBouncer in transaction mode, `select 1`
        // briefly links this client to the server connection that holds its LISTEN, and a probe
        // committed meanwhile was heard there: a deaf LISTEN logged "hears again" now and then.
        if (client === listening) probe();
      }, () => scheduleReconnect());
    }, heartbeatMs);
    heartbeat.unref();
  };
  const scheduleReconnect = () => {
    clearInterval(heartbeat);
    endProbe();
    if (stopped || retryTimer) return;
    const old = client;
    client = undefined;
    old?.removeAllListeners();
    old?.on('error', () => {});
    old?.end().catch(() => {});
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect();
    }, backoffMs);
    backoffMs = Math.min(backoffMs * 2, 5_000);
  };
  void connect();
  return async () => {
    stopped = true;
    clearInterval(heartbeat);
    endProbe();
    if (retryTimer) clearTimeout(retryTimer);
    const old = client;
    client = undefined;
    if (old) {
      old.removeAllListeners();
      old.on('error', () => {});
      await old.end().catch(() => {});
    }
  };
}
