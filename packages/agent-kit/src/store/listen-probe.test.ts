// A LISTEN connection proves that it hears (ADR-0106): through a pooler in transaction mode
// LISTEN is accepted and then hears nothing, and only a log line says why work waits for the
// poll. Postgres only. The pooler is played by a proxy on the LISTEN connection that, while
// deaf, drops the server's NotificationResponse messages and forwards everything else.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { onPostgres } from '../../test/harness/test-db.js';
import { openPgDb } from './pg-driver.js';

/** A TCP proxy to `port` that parses the server's messages and, while `deaf`, drops notifications ('A'). */
async function notificationEatingProxy(port: number, listenPort = 0) {
  const sockets = new Set<net.Socket>();
  const state = { deaf: false, notificationsForwarded: 0, notificationsDropped: 0 };
  const server = net.createServer((inbound) => {
    const outbound = net.connect(port, '127.0.0.1');
    sockets.add(inbound).add(outbound);
    inbound.on('data', (bytes) => outbound.write(bytes));
    // Every message from the server is a type byte and an int32 length that counts itself.
    let pending = Buffer.alloc(0);
    outbound.on('data', (bytes) => {
      pending = Buffer.concat([pending, bytes]);
      while (pending.length >= 5 && pending.length >= 1 + pending.readInt32BE(1)) {
        const size = 1 + pending.readInt32BE(1);
        const message = pending.subarray(0, size);
        pending = pending.subarray(size);
        if (message[0] === 'A'.charCodeAt(0)) {
          if (state.deaf) {
            state.notificationsDropped++;
            continue;
          }
          state.notificationsForwarded++;
        }
        inbound.write(message);
      }
    });
    for (const socket of [inbound, outbound]) {
      socket.on('error', () => {});
      socket.on('close', () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(listenPort, '127.0.0.1', resolve));
  return {
    state,
    port: (server.address() as net.AddressInfo).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe.runIf(onPostgres)('LISTEN probe', () => {
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://localhost');
  let proxy: Awaited<ReturnType<typeof notificationEatingProxy>>;
  let proxied: string;
  beforeAll(async () => {
    proxy = await notificationEatingProxy(Number(url.port || 5432));
    const through = new URL(url);
    through.hostname = '127.0.0.1';
    through.port = String(proxy.port);
    proxied = through.toString();
  });
  afterAll(async () => {
    await proxy.close();
  });

  /**
   * A store whose statements go straight to the server and whose LISTEN goes through the proxy
   * (AGENT_KIT_LISTEN_URL's path), listening on a channel; what it logs and hears is kept.
   */
  async function listeningStore(options: { probeMs: number; listenUrl?: string }) {
    const logged: string[] = [];
    const heard: string[] = [];
    const db = openPgDb({
      connectionString: url.toString(), listenConnectionString: options.listenUrl ?? proxied, max: 2,
      listenHeartbeatMs: 200, listenProbeMs: options.probeMs, log: (entry) => logged.push(String(entry.msg)),
    });
    const channel = `probe_${process.pid}`;
    const stop = await db.listen(channel, (payload) => heard.push(payload));
    return {
      db, channel, logged, heard,
      async close() {
        await stop();
        await db.close();
      },
    };
  }
  const deafLine = /^LISTEN on probe_\d+ did not hear its own notification within 300 ms: .*AGENT_KIT_LISTEN_URL/;

  it('says nothing while its LISTEN hears, though it asks at every heartbeat', async () => {
    proxy.state.deaf = false;
    // A probe given 2 s: a slow machine's stall must not pass for deafness here.
    const { db, channel, logged, heard, close } = await listeningStore({ probeMs: 2_000 });
    try {
      const before = proxy.state.notificationsForwarded;
      // Several heartbeats, each with a probe that came back through the proxy.
      await vi.waitFor(() => expect(proxy.state.notificationsForwarded - before).toBeGreaterThanOrEqual(4), { timeout: 10_000 });
      await db.query('select pg_notify($1, $2)', [channel, 'hello']);
      await vi.waitFor(() => expect(heard).toContain('hello'), { timeout: 5_000 });
      expect(heard.filter((payload) => payload !== '' && payload !== 'hello')).toEqual([]); // the probes are not the caller's
      expect(logged).toEqual([]);
    } finally {
      await close();
    }
  });

  it('says once that its LISTEN hears nothing, and again when it hears', async () => {
    proxy.state.deaf = true;
    const { db, channel, logged, heard, close } = await listeningStore({ probeMs: 300 });
    try {
      await vi.waitFor(() => expect(logged.some((line) => deafLine.test(line))).toBe(true), { timeout: 5_000 });
      // Probes go on at every heartbeat, and are dropped; the line is not said again.
      const dropped = proxy.state.notificationsDropped;
      await vi.waitFor(() => expect(proxy.state.notificationsDropped - dropped).toBeGreaterThanOrEqual(3), { timeout: 10_000 });
      expect(logged.filter((line) => deafLine.test(line))).toHaveLength(1);

      proxy.state.deaf = false;
      await vi.waitFor(() => expect(logged).toContain(`LISTEN on ${channel} hears notifications again`), { timeout: 5_000 });
      await db.query('select pg_notify($1, $2)', [channel, 'after']);
      await vi.waitFor(() => expect(heard).toContain('after'), { timeout: 5_000 });
    } finally {
      await close();
    }
  });

  it('says once that its LISTEN cannot connect (a wrong AGENT_KIT_LISTEN_URL), and once that it did', async () => {
    const spare = net.createServer();
    await new Promise<void>((resolve) => spare.listen(0, '127.0.0.1', resolve));
    const port = (spare.address() as net.AddressInfo).port;
    await new Promise((resolve) => spare.close(resolve)); // nothing listens there now
    const nowhere = new URL(url);
    nowhere.hostname = '127.0.0.1';
    nowhere.port = String(port);
    const { channel, logged, close } = await listeningStore({ probeMs: 2_000, listenUrl: nowhere.toString() });
    let late: Awaited<ReturnType<typeof notificationEatingProxy>> | undefined;
    try {
      const refused = new RegExp(`^LISTEN on ${channel} could not connect \\(.*ECONNREFUSED.*\\): trying again with backoff`);
      await vi.waitFor(() => expect(logged.some((line) => refused.test(line))).toBe(true), { timeout: 5_000 });
      await new Promise((resolve) => setTimeout(resolve, 1_000)); // tries at 0.1, 0.2, 0.4, 0.8 s: said once
      expect(logged.filter((line) => refused.test(line))).toHaveLength(1);
      late = await notificationEatingProxy(Number(url.port || 5432), port); // the server is there now
      await vi.waitFor(() => expect(logged).toContain(`LISTEN on ${channel} connected`), { timeout: 10_000 });
      expect(logged.filter((line) => /did not hear/.test(line))).toEqual([]);
    } finally {
      await close();
      await late?.close();
    }
  });
});
