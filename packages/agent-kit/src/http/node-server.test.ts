// One end-to-end pass through a real node:http server on 127.0.0.1 (port 0) with fetch and an
// SSE parser, as a browser would: the chat POST streams the turn, a client that disconnects
// mid-turn leaves the turn running to completion, and a reconnect with Last-Event-ID resumes.
// A replay to a slow reader makes the server wait for 'drain' again and again; each wait must
// leave no listener behind (the response's 'close' listeners are counted at every drain).
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
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
  // Nobody runs the turn while it is read (a reader runs a turn that is due: ADR-0120).
  await t.db.query(`update agent_kit_jobs set due_at = now() + interval '1 hour' where run_id = $1`, [turn!.run_id]);
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

/** One request written as is (`lines` joined by CRLF), and the status and body of its answer. */
async function raw(lines: string[]): Promise<{ status: number; body: string }> {
  const { port } = server.address() as AddressInfo;
  const socket = net.connect(port, '127.0.0.1');
  socket.write(`${lines.join('\r\n')}\r\n\r\n`); // (not end(): the server would close on our FIN)
  let text = '';
  for await (const chunk of socket) text += String(chunk);
  const at = text.indexOf('\r\n\r\n');
  const head = text.slice(0, at);
  let body = text.slice(at + 4);
  if (/^transfer-encoding: chunked$/im.test(head)) { // its chunks' data, without their sizes
    let data = '';
    for (let size = 0; (size = parseInt(body, 16)) > 0;) {
      const start = body.indexOf('\r\n') + 2;
      data += body.slice(start, start + size);
      body = body.slice(start + size + 2);
    }
    body = data;
  }
  const status = /^HTTP\/1\.1 (\d+)/.exec(head);
  if (!status) throw new Error(`not an HTTP answer: ${JSON.stringify(text.slice(0, 300))}`);
  return { status: Number(status[1]), body };
}

it('routes by the request target alone: a Host header never picks the path, a bad one is a 400 with its reason', async () => {
  const [turn] = await t.db.query<{ thread_id: string }>(`select thread_id from agent_kit_start_turn(null, 'alice', 'mine')`);
  const thread = `/api/threads/${turn!.thread_id}`;
  const ask = (target: string, host: string) =>
    raw([`GET ${target} HTTP/1.1`, `Host: ${host}`, 'x-user: alice', 'Connection: close']);
  expect((await ask(thread, 'localhost')).status).toBe(200);
  // A Host header with a path in it routed the request to that path.
  const smuggled = await ask('/api/nothing', `x${thread}?`);
  expect(smuggled.status).toBe(400);
  expect(JSON.parse(smuggled.body)).toMatchObject({ error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(/Host/) } });
  for (const host of ['[bad', '127.0.0.1:3000@evil', 'a b']) {
    const bad = await ask(thread, host);
    expect(bad.status, host).toBe(400); // (was a 500 with an empty body)
    expect(JSON.parse(bad.body).error.code, host).toBe('INVALID_ARGUMENT');
  }
  // An absolute-form target (what a proxy sends): its path and query, whatever host it names.
  expect((await ask(`http://evil.example${thread}`, 'localhost')).status).toBe(200);
  expect((await ask('http://evil.example/api/nothing', 'localhost')).status).toBe(404);
});

it('takes a POST without a body as curl -X POST sends it (no Content-Length), and refuses bytes without a content type', async () => {
  const queued = async () => (await t.db.query<{ run_id: string }>(`select run_id from agent_kit_start_turn(null, 'alice', 'stop me')`))[0]!.run_id;
  const post = (path: string, ...more: string[]) =>
    raw([`POST ${path} HTTP/1.1`, 'Host: localhost', 'x-user: alice', 'x-operator: 1', 'Connection: close', ...more]);
  // (was a 415 through this adapter: it handed every POST a body stream, empty or not)
  for (const headers of [[], ['Content-Length: 0']]) {
    const cancel = await post(`/api/runs/${await queued()}/cancel`, ...headers);
    expect(cancel.status, cancel.body).toBe(202);
    const takeover = await post(`/api/runs/${await queued()}/takeover`, ...headers);
    expect(takeover.status, takeover.body).toBe(200);
  }
  const sent = await raw([`POST /api/runs/${await queued()}/cancel HTTP/1.1`, 'Host: localhost', 'x-user: alice',
    'Connection: close', 'Content-Length: 10', '', 'shownSeq=1']);
  expect(sent.status).toBe(415);
  expect(JSON.parse(sent.body).error.message)
    .toBe('send the body as application/json (content-type: application/json); it came without a content type');
  await t.handlers.segments.settle();
});

it('takes a body a parser read first from req.body, and tells onError what a bare 500 hides', async () => {
  // As Express runs express.json() before the routes: the stream is read, req.body holds the JSON.
  const errors: string[] = [];
  const listener = toNodeListener(t.handlers.handle, { onError: (error) => errors.push(String(error)) });
  const parsed = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const body = req.headers['x-leave-body'] ? undefined : text === '' ? undefined : JSON.parse(text) as unknown;
      Object.assign(req, { body });
      listener(req, res);
    });
  });
  await new Promise<void>((resolve) => parsed.listen(0, '127.0.0.1', resolve));
  const at = `http://127.0.0.1:${(parsed.address() as AddressInfo).port}`;
  try {
    const queued = (await t.db.query<{ run_id: string }>(`select run_id from agent_kit_start_turn(null, 'alice', 'x')`))[0]!.run_id;
    const post = (body: string, more: Record<string, string> = {}) => fetch(`${at}/api/runs/${queued}/cancel`, {
      method: 'POST', headers: { 'x-user': 'alice', 'content-type': 'application/json', ...more }, body,
    });
    const cancelled = await post('{ "shownSeq" : 0 }');
    expect(cancelled.status).toBe(202); // was a bare 500: "Response body object should not be disturbed or locked"
    expect(await cancelled.json()).toMatchObject({ runId: queued, cancelRequested: true });
    const bad = await post('{"shownSeq": -1}');
    expect(bad.status).toBe(400); // the route still checks the body
    const lost = await post('{}', { 'x-leave-body': '1' });
    expect(lost.status).toBe(500);
    expect(errors).toEqual([expect.stringMatching(/read before agent-kit's handler and is not in req.body: mount agent-kit's routes before any body parser/)]);
  } finally {
    parsed.closeAllConnections();
    await new Promise((resolve) => parsed.close(resolve));
    await t.handlers.segments.settle();
  }
});
