// A LISTEN connection that dies without a word (a NAT or proxy that forgets it: no FIN, no RST,
// the kernel still acknowledges) is noticed by the heartbeat and opened again (Postgres only:
// PGlite has no connection to lose). Through a TCP proxy that can stop forwarding.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { onPostgres } from '../../test/harness/test-db.js';
import type { Db } from './db.js';
import { openPgDb } from './pg-driver.js';

/** A TCP proxy to `port` whose `freeze()` makes every open connection swallow all bytes, both ways. */
async function freezableProxy(port: number) {
  const open = new Set<{ frozen: boolean; sockets: net.Socket[] }>();
  const server = net.createServer((inbound) => {
    const outbound = net.connect(port, '127.0.0.1');
    const pair = { frozen: false, sockets: [inbound, outbound] };
    open.add(pair);
    inbound.on('data', (bytes) => pair.frozen || outbound.write(bytes));
    outbound.on('data', (bytes) => pair.frozen || inbound.write(bytes));
    for (const socket of pair.sockets) {
      socket.on('error', () => {});
      socket.on('close', () => {
        open.delete(pair);
        for (const other of pair.sockets) other.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    freeze() {
      for (const pair of open) pair.frozen = true;
    },
    async close() {
      for (const pair of open) for (const socket of pair.sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe.runIf(onPostgres)('LISTEN heartbeat', () => {
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://localhost');
  let proxy: Awaited<ReturnType<typeof freezableProxy>>;
  let direct: Db;
  beforeAll(async () => {
    proxy = await freezableProxy(Number(url.port || 5432));
    direct = openPgDb({ connectionString: url.toString(), max: 1 });
  });
  afterAll(async () => {
    await direct.close();
    await proxy.close();
  });

  it('drops a LISTEN connection that stopped answering and listens again on a new one', async () => {
    const proxied = new URL(url);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    // Only the LISTEN connection goes through the proxy: a frozen pool would hold its statements
    // (the heartbeat's probe among them, ADR-0106) until TCP gave up, and the pool's close with them.
    const db = openPgDb({ connectionString: url.toString(), listenConnectionString: proxied.toString(), max: 1, listenHeartbeatMs: 200 });
    const channel = `heartbeat_${process.pid}`;
    const heard: string[] = [];
    const stop = await db.listen(channel, (payload) => heard.push(payload));
    const notify = (payload: string) => direct.query('select pg_notify($1, $2)', [channel, payload]);
    try {
      await vi.waitFor(() => expect(heard).toEqual(['']), { timeout: 5_000 });
      await notify('before');
      await vi.waitFor(() => expect(heard).toContain('before'), { timeout: 5_000 });

      proxy.freeze();
      await notify('while frozen');
      // A heartbeat unanswered for a period: a new connection, and the caller told to look ('').
      await vi.waitFor(() => expect(heard.filter((p) => p === '')).toHaveLength(2), { timeout: 5_000, interval: 50 });
      await notify('after');
      await vi.waitFor(() => expect(heard).toContain('after'), { timeout: 5_000 });
      expect(heard).not.toContain('while frozen');
    } finally {
      await stop();
      await db.close();
    }
  });
});
