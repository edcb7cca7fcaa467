// One end-to-end pass through a real node:http server on 127.0.0.1 (port 0) with fetch and an
// SSE parser, as a browser would: the chat POST streams the turn, a client that disconnects
// mid-turn leaves the turn running to completion, and a reconnect with Last-Event-ID resumes.
// A replay to a slow reader makes the server wait for 'drain' again and again; each wait must
// leave no listener behind (the response's 'close' listeners are counted at every drain).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openHttpTest, payload, readSse, type HttpTest } from '../../test/harness/http-harness.js';
import { toNodeListener } from './node-server.js';

let t: HttpTest;
let server: http.Server;
let origin: string;
let open!: () => void;

beforeAll(async () => {
  const gate = new Promise<void>((resolve) => (open = resolve));
  t = await openHttpTest({ segment: { deltas: ['over ', 'the ', 'wire'], delayMs: 5, gate } });
  server = http.createServer(toNodeListener(t.handlers.handle));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await t.close();
});

it('streams a turn over node:http; a disconnect leaves it running; Last-Event-ID resumes', async () => {
  const controller = new AbortController();
  const response = await fetch(`${origin}/api/chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-user': 'alice' },
    body: JSON.stringify({ message: 'hello over the wire' }),
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const threadId = response.headers.get('x-agent-kit-thread-id')!;
  const runId = response.headers.get('x-agent-kit-run-id')!;
  const before = await readSse(response, { until: (e) => e.event === 'segment-started' });
  controller.abort(); // the browser tab closes mid-turn
  const lastId = before.events.at(-1)!.id!;
  open();
  await t.handlers.segments.settle();
  const [run] = await t.db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
  expect(run!.status).toBe('completed');

  const resumed = await fetch(`${origin}/api/threads/${threadId}/events`, {
    headers: { 'x-user': 'alice', 'last-event-id': lastId },
  });
  const rest = await readSse(resumed, { until: (e) => e.event === 'run-closed' });
  expect(Number(rest.events[0]!.id)).toBe(Number(lastId) + 1);
  const all = [...before.events, ...rest.events].map((e) => Number(e.id));
  expect(all).toEqual(all.map((_, i) => i + 1));
  expect(payload(rest.events.at(-1)!).data).toMatchObject({ status: 'completed', text: 'over the wire' });

  const stranger = await fetch(`${origin}/api/threads/${threadId}`, { headers: { 'x-user': 'mallory' } });
  expect(stranger.status).toBe(404);
});

it('a replay to a slow reader waits for drain again and again; no listener is left', async () => {
  // 3,000 events of ~2 KB (6 MB): more than loopback's socket buffers, so writes must wait.
  const [turn] = await t.db.query<{ thread_id: string; run_id: string }>(
    `select thread_id, run_id from agent_kit_start_turn(null, 'alice', 'a slow reader')`,
  );
  await t.db.query(
    `select count(agent_kit__append_event($1, $2, 1, 'text-delta',
       jsonb_build_object('text', repeat('x', 2000)))) from generate_series(1, 3000) g`,
    [turn!.thread_id, turn!.run_id],
  );
  const total = 3_002; // with the message and run-queued events
  let drains = 0;
  let mostCloseListeners = 0;
  let response: http.ServerResponse | undefined;
  const listener = toNodeListener(t.handlers.handle);
  const slowServer = http.createServer((req, res) => {
    response = res;
    res.on('drain', () => {
      drains++;
      mostCloseListeners = Math.max(mostCloseListeners, res.listenerCount('close'));
    });
    listener(req, res);
  });
  await new Promise<void>((resolve) => slowServer.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = slowServer.address() as AddressInfo;
    const stream = await fetch(`http://127.0.0.1:${port}/api/threads/${turn!.thread_id}/events`, {
      headers: { 'x-user': 'alice' },
    });
    // Read slowly: a pause before each read lets the socket buffers fill up behind the reader.
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
    let rest = '';
    const ids: number[] = [];
    while (ids.length < total) {
      await new Promise((resolve) => setTimeout(resolve, 2));
      const { done, value } = await reader.read();
      if (done) break;
      const frames = (rest + value).split('\n\n');
      rest = frames.pop()!;
      for (const frame of frames) {
        const id = /^id: (\d+)$/m.exec(frame)?.[1];
        if (id) ids.push(Number(id));
      }
    }
    await reader.cancel();
    expect(ids).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(drains).toBeGreaterThanOrEqual(3);
    // toNodeListener's own (abort on close) plus the one wait in progress, however many waits.
    expect(mostCloseListeners).toBeLessThanOrEqual(2);
    expect(response!.listenerCount('close')).toBeLessThanOrEqual(1);
  } finally {
    slowServer.closeAllConnections();
    await new Promise((resolve) => slowServer.close(resolve));
  }
});
