// The app opens its store itself, so the store's settings must reach it from the environment:
// AGENT_KIT_POOL_MAX (the pool's size) and AGENT_KIT_LISTEN_URL (where LISTEN goes, ADR-0106).
// Postgres only: the embedded store has neither a pool nor LISTEN connections.
import { openDb, type Db } from 'agent-kit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestStore, printServerOutputOnFailure, startServer, type AppServer, type TestStore } from './harness';

const serverUrl = process.env.DATABASE_URL;

describe.runIf(serverUrl)('the app on Postgres', () => {
  let store: TestStore;
  let server: AppServer;
  let admin: Db;

  beforeAll(async () => {
    store = await createTestStore();
    admin = await openDb({ databaseUrl: serverUrl });
    server = await startServer({
      store,
      env: {
        AGENT_KIT_POOL_MAX: '1',
        // Another database of the same server: LISTEN there is accepted and hears none of the
        // store's notifications, as through a pooler in transaction mode.
        AGENT_KIT_LISTEN_URL: serverUrl!,
      },
    });
  });

  printServerOutputOnFailure(() => server);

  afterAll(async () => {
    await server?.stop();
    await admin?.close();
    await store?.dispose();
  });

  it('says when its LISTEN hears nothing, and names AGENT_KIT_LISTEN_URL', async () => {
    // The app's worker listens on agent_kit_jobs from the start; its probe waits 5 s.
    await vi.waitFor(() => expect(server.output()).toMatch(/LISTEN on agent_kit_jobs did not hear its own notification.*AGENT_KIT_LISTEN_URL/), {
      timeout: 15_000, interval: 200,
    });
  });

  it('keeps its pool to AGENT_KIT_POOL_MAX connections under concurrent requests', async () => {
    const signIn = await fetch(`${server.baseUrl}/login`, {
      method: 'POST', redirect: 'manual', headers: { origin: server.baseUrl },
      body: new URLSearchParams({ name: 'pool' }),
    });
    const cookie = signIn.headers.get('set-cookie')?.split(';')[0];
    expect(cookie).toMatch(/=/);
    const database = new URL(store.databaseUrl!).pathname.slice(1);
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [row] = await admin.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where datname = $1 and application_name = 'agent-kit'`, [database],
        );
        most = Math.max(most, row!.n);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    for (let round = 0; round < 10; round++) {
      const answers = await Promise.all(Array.from({ length: 8 }, () => fetch(`${server.baseUrl}/api/threads`, { headers: { cookie: cookie! } })));
      expect(answers.map((answer) => answer.status)).toEqual(Array(8).fill(200));
    }
    sampling = false;
    await sampler;
    expect(most).toBe(1); // one connection, in use or idle: at the default of 10, 8 requests at once opened several
  });
});
