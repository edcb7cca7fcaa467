// One end-to-end pass through a real node:http server on 127.0.0.1 (port 0) with fetch and an
// SSE parser, as a browser would: the chat POST streams the turn, a client that disconnects
// mid-turn leaves the turn running to completion, and a reconnect with Last-Event-ID resumes.
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
