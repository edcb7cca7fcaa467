// TLS to Postgres, as Supabase, Neon and RDS are reached: through a TLS front for the test server
// (test/harness/tls-proxy.ts) whose certificate a private CA signed. The CLI and the library
// connect with the connection string's `sslmode`/`sslrootcert`, or with `ssl` in code; a refused
// certificate or a server without TLS fails at once with a StoreTlsError that names the setting
// to change, and writes nothing. On the Postgres pass only: the front relays to the real server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCli, run } from '../../test/hostile/cli-kit.js';
import { adminQuery, databasePrefix, onPostgres, urlForDatabase } from '../../test/harness/test-db.js';
import { makeTestCertificates, startTlsProxy, type TestCertificates, type TlsProxy } from '../../test/harness/tls-proxy.js';
import { StoreTlsError } from '../errors.js';
import { openPgDb } from './pg-driver.js';

const database = `${databasePrefix}tls`;
let bin: string;
let certs: TestCertificates;
let trusted: TlsProxy; // a certificate for localhost and 127.0.0.1
let otherHost: TlsProxy; // a certificate for db.elsewhere.test only
let noTls: TlsProxy; // a server with ssl = off

beforeAll(async () => {
  if (!onPostgres) return;
  bin = await buildCli();
  certs = await makeTestCertificates();
  const target = { host: '127.0.0.1', port: Number(new URL(urlForDatabase(database)).port || 5432) };
  [trusted, otherHost, noTls] = await Promise.all([
    startTlsProxy(target, certs.server), startTlsProxy(target, certs.otherName), startTlsProxy(target),
  ]);
  await adminQuery(`drop database if exists ${database}`);
  await adminQuery(`create database ${database}`); // empty: `agent-kit migrate` is the first thing over TLS
}, 300_000);

afterAll(async () => {
  if (!onPostgres) return;
  await Promise.all([trusted, otherHost, noTls].map((proxy) => proxy?.close()));
  certs?.remove();
  await adminQuery(`drop database if exists ${database} with (force)`);
});

/** The test database's URL through `proxy`, by `host`, with `params` (sslmode=… etc.). */
function urlThrough(proxy: TlsProxy, params: string, host = 'localhost'): string {
  const url = new URL(urlForDatabase(database));
  url.hostname = host;
  url.port = String(proxy.port);
  return `${url.toString()}?${params}`;
}

function agentKit(args: string[], databaseUrl: string) {
  return run(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH, DATABASE_URL: databaseUrl }, timeoutMs: 120_000,
  });
}

async function agentKitTables(): Promise<number> {
  const pg = await import('pg');
  const client = new pg.default.Client({ connectionString: urlForDatabase(database) });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      "select count(*) as n from pg_tables where tablename like 'agent_kit%'");
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

describe.runIf(onPostgres)('TLS to Postgres', () => {
  it('refuses a certificate from a CA this process does not trust, naming sslrootcert, and writes nothing', async () => {
    const before = trusted.encrypted;
    const result = await agentKit(['migrate'], urlThrough(trusted, 'sslmode=verify-full'));
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toContain('error: the database server\'s TLS certificate is not signed by a CA this process trusts');
    expect(result.stderr).toContain('?sslmode=verify-full&sslrootcert=/path/to/ca.pem');
    expect(result.stderr).toContain('(unable to verify the first certificate)');
    expect(result.stderr).not.toMatch(/\n\s+at /); // a message, not a stack
    expect(trusted.encrypted).toBe(before); // the handshake failed: nothing was relayed
    expect(await agentKitTables()).toBe(0);
  }, 120_000);

  it('migrates and runs a turn over TLS verified against the CA named by sslrootcert', async () => {
    const url = urlThrough(trusted, `sslmode=verify-full&sslrootcert=${encodeURIComponent(certs.caFile)}`);
    const before = { encrypted: trusted.encrypted, plain: trusted.plain };
    const migrated = await agentKit(['migrate'], url);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(await agentKitTables()).toBeGreaterThan(5);

    const chat = await agentKit(['chat', 'hello #effect'], url);
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stderr).toContain('[tool record_effect: completed]');
    const listed = await agentKit(['runs', '--json'], url);
    expect(listed.code, listed.stderr).toBe(0);
    const runs = JSON.parse(listed.stdout) as { status: string }[];
    expect(runs.map((r) => r.status)).toEqual(['completed']);
    expect(trusted.encrypted - before.encrypted).toBeGreaterThanOrEqual(3); // one or more per command
    expect(trusted.plain).toBe(before.plain);
  }, 240_000);

  it('refuses a certificate for another host name, saying so', async () => {
    const result = await agentKit(['runs'], urlThrough(otherHost, `sslmode=verify-full&sslrootcert=${encodeURIComponent(certs.caFile)}`));
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toContain('TLS certificate is for another host name');
    expect(result.stderr).toContain('db.elsewhere.test');
  }, 120_000);

  it('says so when the connection string asks for TLS and the server has none', async () => {
    const result = await agentKit(['runs'], urlThrough(noTls, 'sslmode=verify-full'));
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toContain('asks for TLS (sslmode or ssl=true) but this server has ssl = off');
  }, 120_000);

  it('the library takes the CA in code (ssl: { ca }), for its pool and its LISTEN connection', async () => {
    const before = { encrypted: trusted.encrypted, plain: trusted.plain };
    const db = openPgDb({ connectionString: urlThrough(trusted, '').replace(/\?$/, ''), ssl: { ca: certs.ca } });
    try {
      const heard: string[] = [];
      const stop = await db.listen('agent_kit_tls_test', (payload) => heard.push(payload));
      const [row] = await db.query<{ n: number }>('select 1 + 1 as n');
      expect(row!.n).toBe(2);
      for (let i = 0; i < 100 && !heard.includes('over tls'); i++) {
        await db.exec("notify agent_kit_tls_test, 'over tls'");
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(heard).toContain('over tls');
      await stop();
      expect(trusted.encrypted - before.encrypted).toBeGreaterThanOrEqual(2); // the pool's and LISTEN's
      expect(trusted.plain).toBe(before.plain);
    } finally {
      await db.close();
    }
  }, 60_000);

  it('the library throws StoreTlsError, with the driver\'s error as its cause; the URL\'s sslmode takes precedence over ssl', async () => {
    const untrusted = openPgDb({ connectionString: urlThrough(trusted, 'sslmode=verify-full') });
    try {
      const error = await untrusted.query('select 1').then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(StoreTlsError);
      expect((error as StoreTlsError).code).toBe('STORE_TLS');
      expect(((error as Error).cause as { code?: string }).code).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    } finally {
      await untrusted.close();
    }
    const before = { encrypted: trusted.encrypted, plain: trusted.plain };
    const plain = openPgDb({ connectionString: urlThrough(trusted, 'sslmode=disable'), ssl: { ca: certs.ca } });
    try {
      await plain.query('select 1');
    } finally {
      await plain.close();
    }
    expect([trusted.encrypted - before.encrypted, trusted.plain - before.plain]).toEqual([0, 1]);
  }, 60_000);
});
