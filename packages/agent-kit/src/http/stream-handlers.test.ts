// The streaming routes through `handle(new Request(...))` on both stores: the chat POST runs its
// turn in the background and streams it (SSE ids = seqs) until the run closes; the events route
// resumes from Last-Event-ID or ?after=; a client that goes away never stops the turn; idle
// streams send keep-alives and end at their budget; ?format=ai-sdk is read by the AI SDK itself.
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  makeRequest, openHttpTest, payload, readSse, type HttpTest,
} from '../../test/harness/http-harness.js';
import { readEvents } from '../event-log/read-events.js';
import { createHandlers } from './handlers.js';
import { headerAuth } from '../../test/harness/http-harness.js';
import { fakeRunSegment } from '../../test/harness/fake-segment.js';
import { claimRun, closeRun, mirrorPartial } from '../lease/lease.js';
import { startTurn } from '../queue/start-turn.js';

let t: HttpTest;
beforeAll(async () => {
  t = await openHttpTest({ segment: { deltas: ['The ', 'answer ', 'is ', '42.'], delayMs: 5 } });
});
afterAll(async () => {
  await t.close();
});

async function chat(body: Record<string, unknown>, options: { user?: string; signal?: AbortSignal; query?: string } = {}) {
  return t.handlers.handle(makeRequest('POST', `/api/chat${options.query ?? ''}`, {
    user: options.user ?? 'alice', body, signal: options.signal,
  }));
}

async function runStatus(runId: string) {
  await t.handlers.segments.settle();
  const [row] = await t.db.query<{ status: string }>('select status from agent_kit_runs where id = $1', [runId]);
  return row?.status;
}

describe('POST /api/chat', () => {
  it('streams the turn from the user message to the closed run, with ids equal to seqs', async () => {
    const response = await chat({ message: 'What is the answer?' });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(response.headers.get('cache-control')).toBe('no-cache, no-transform');
    expect(response.headers.get('x-accel-buffering')).toBe('no');
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    const runId = response.headers.get('x-agent-kit-run-id')!;
    // A page of another origin may read them too (the client's stop() needs the run id).
    expect(response.headers.get('access-control-expose-headers')?.split(', ').sort()).toEqual([
      'x-agent-kit-message-id', 'x-agent-kit-run-id', 'x-agent-kit-thread-id',
    ]);
    const read = await readSse(response);
    expect(read.ended).toBe(true);
    expect(read.retries).toEqual([2000]); // ended by the run's close: no quick reconnect
    const types = read.events.map((e) => e.event);
    expect(types[0]).toBe('message');
    expect(types.at(-1)).toBe('run-closed');
    expect(payload(read.events.at(-1)!).data).toMatchObject({ status: 'completed', text: 'The answer is 42.' });
    const log = await readEvents(t.db, { threadId, limit: 1000 });
    expect(read.events.map((e) => Number(e.id))).toEqual(log.map((e) => e.seq));
    // The log as it is, but a segment's start without its lease owner (ADR-0107): alice is no operator.
    const started = log.find((e) => e.type === 'segment-started')!;
    expect(started.data.owner).toEqual(expect.any(String));
    const { owner: _owner, ...startedForViewers } = started.data;
    expect(read.events.map((e) => payload(e))).toEqual(log.map((e) => ({
      seq: e.seq, runId: e.runId, fence: e.fence, type: e.type, data: e === started ? startedForViewers : e.data,
      createdAt: e.createdAt.toISOString(),
    })));
    expect(await runStatus(runId)).toBe('completed');
    expect(t.runner.calls).toContain(runId);
    // An operator reading the same thread gets the owner: the operator page's timeline names it.
    const operatorRead = await readSse(
      await t.handlers.handle(makeRequest('GET', `/api/threads/${threadId}/events`, { user: 'op', operator: true })), { max: log.length },
    );
    expect(operatorRead.events.map((e) => payload(e).data)).toEqual(log.map((e) => e.data));
  });

  it('a retried POST with the same client message id creates nothing and replays the same turn', async () => {
    const response = await chat({ message: 'once', clientMessageId: 'c-1' });
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    const first = await readSse(response);
    const [before] = await t.db.query<{ n: number }>('select count(*)::int as n from agent_kit_runs');
    const retry = await chat({ message: 'once', clientMessageId: 'c-1', threadId });
    const replay = await readSse(retry);
    const [after] = await t.db.query<{ n: number }>('select count(*)::int as n from agent_kit_runs');
    expect(after!.n).toBe(before!.n);
    expect(replay.events.map((e) => e.id)).toEqual(first.events.map((e) => e.id));

    // The same id with another text is not a retry: a 409 that says so, and nothing stored.
    const [messagesBefore] = await t.db.query<{ n: number }>('select count(*)::int as n from agent_kit_messages');
    const other = await chat({ message: 'something else', clientMessageId: 'c-1', threadId });
    expect(other.status).toBe(409); // (was a 200 replaying the first turn, the new text dropped)
    expect((await other.json()).error).toMatchObject({ code: 'CONFLICT', message: expect.stringMatching(/c-1.*another message/) });
    const [messagesAfter] = await t.db.query<{ n: number }>('select count(*)::int as n from agent_kit_messages');
    expect(messagesAfter!.n).toBe(messagesBefore!.n);
  });

  it('a client that aborts mid-stream does not stop the turn: the run still closes', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const local = await openHttpTest({ segment: { deltas: ['still ', 'here'], gate } });
    try {
      const controller = new AbortController();
      const response = await local.handlers.handle(makeRequest('POST', '/api/chat', {
        user: 'alice', body: { message: 'abort me' }, signal: controller.signal,
      }));
      const runId = response.headers.get('x-agent-kit-run-id')!;
      await readSse(response, { until: (e) => e.event === 'segment-started' });
      controller.abort();
      expect(local.handlers.segments.active()).toEqual([runId]);
      open();
      await local.handlers.segments.settle();
      const [row] = await local.db.query<{ status: string; text: string }>(
        `select r.status, m.content->>'text' as text from agent_kit_runs r
         join agent_kit_messages m on m.id = r.message_id where r.id = $1`, [runId]);
      expect(row).toEqual({ status: 'completed', text: 'still here' });
    } finally {
      await local.close();
    }
  });
});

describe('GET /api/threads/:id/events', () => {
  it('resumes after Last-Event-ID, and after ?after=, with Last-Event-ID winning', async () => {
    const response = await chat({ message: 'resume' });
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    const all = (await readSse(response)).events;
    const events = (path: string, headers: Record<string, string> = {}) =>
      t.handlers.handle(makeRequest('GET', path, { user: 'alice', headers }));
    const byHeader = await readSse(await events(`/api/threads/${threadId}/events`, { 'last-event-id': '3' }),
      { max: all.length - 3 });
    expect(byHeader.events.map((e) => e.id)).toEqual(all.slice(3).map((e) => e.id));
    const byQuery = await readSse(await events(`/api/threads/${threadId}/events?after=5`), { max: all.length - 5 });
    expect(byQuery.events.map((e) => e.id)).toEqual(all.slice(5).map((e) => e.id));
    const both = await readSse(await events(`/api/threads/${threadId}/events?after=1`, { 'last-event-id': '6' }),
      { max: 1 });
    expect(both.events[0]!.id).toBe('7');
  });

  it('refuses a cursor past the log\'s end (409), which waited, silent, for the log to reach it', async () => {
    const response = await chat({ message: 'a cursor from elsewhere' });
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    const last = Number((await readSse(response)).events.at(-1)!.id);
    const events = (path: string, headers: Record<string, string> = {}) =>
      t.handlers.handle(makeRequest('GET', path, { user: 'alice', headers }));
    for (const [path, headers] of [
      [`/api/threads/${threadId}/events`, { 'last-event-id': String(last + 1) }],
      [`/api/threads/${threadId}/events?after=9999`, {}],
      [`/api/threads/${threadId}/events?format=ai-sdk`, { 'last-event-id': String(last + 1) }],
    ] as const) {
      const refused = await events(path, headers);
      expect(refused.status, path).toBe(409);
      expect(((await refused.json()) as { error: { message: string } }).error.message)
        .toMatch(new RegExp(`^the cursor \\d+ is past the thread's last event \\(seq ${last}\\): read the thread again`));
    }
    // The last event itself is where a viewer that saw everything reads on from.
    const atEnd = await events(`/api/threads/${threadId}/events`, { 'last-event-id': String(last) });
    expect(atEnd.status).toBe(200);
    await atEnd.body?.cancel();
    // A number too large to be any seq says so.
    const huge = await events(`/api/threads/${threadId}/events`, { 'last-event-id': '99999999999999999999' });
    expect(huge.status).toBe(400);
    expect(((await huge.json()) as { error: { message: string } }).error.message).toMatch(/^invalid Last-Event-ID: is larger than any seq/);
  });

  it('many viewers of one thread all receive the same gapless sequence', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const local = await openHttpTest({ segment: { deltas: Array.from({ length: 15 }, (_, i) => `d${i} `), gate } });
    try {
      const response = await local.handlers.handle(makeRequest('POST', '/api/chat', { user: 'bob', body: { message: 'crowd' } }));
      const threadId = response.headers.get('x-agent-kit-thread-id')!;
      const isClose = (e: { event?: string }) => e.event === 'run-closed';
      const viewers = await Promise.all(Array.from({ length: 20 }, () =>
        local.handlers.handle(makeRequest('GET', `/api/threads/${threadId}/events`, { user: 'bob' }))));
      const reads = Promise.all([response, ...viewers].map((r) => readSse(r, { until: isClose })));
      open();
      const seen = await reads;
      const ids = seen[0]!.events.map((e) => Number(e.id));
      expect(ids).toEqual(ids.map((_, i) => i + 1));
      for (const read of seen) expect(read.events.map((e) => e.data)).toEqual(seen[0]!.events.map((e) => e.data));
    } finally {
      await local.close();
    }
  });

  it('reads the log only as fast as the client reads the stream (one page at a time)', async () => {
    const deltas = Array.from({ length: 250 }, (_, i) => `x${i}`);
    const local = await openHttpTest({ segment: { deltas } });
    let reads = 0;
    const counted = { ...local.db, query: (sql: string, params?: readonly unknown[]) => {
      if (sql.includes('from agent_kit_thread_events') && sql.includes('seq >')) reads++;
      return local.db.query(sql, params);
    } } as typeof local.db;
    try {
      const response = await local.handlers.handle(makeRequest('POST', '/api/chat', { user: 'bob', body: { message: 'long' } }));
      const threadId = response.headers.get('x-agent-kit-thread-id')!;
      const total = (await readSse(response)).events.length;
      const handlers = createHandlers({ rt: { ...local.rt, db: counted }, authenticate: headerAuth });
      const stream = await handlers.handle(makeRequest('GET', `/api/threads/${threadId}/events`, { user: 'bob' }));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(reads).toBe(0); // nobody pulled: nothing was read ahead
      const reader = stream.body!.getReader();
      await reader.read(); // the retry hint, queued before any pull
      const first = new TextDecoder().decode((await reader.read()).value);
      expect(first.match(/^id: /gm)).toHaveLength(200); // the first page, in one chunk
      await new Promise((resolve) => setTimeout(resolve, 100));
      // The stream pulled one chunk (the next page) ahead, then stopped: the client is not reading.
      expect(reads).toBe(2);
      await reader.cancel();
      reads = 0;
      const read = await readSse(await handlers.handle(makeRequest('GET', `/api/threads/${threadId}/events`, { user: 'bob' })), { max: total });
      expect(read.events.length).toBe(total);
      // Pages of 200 then 1,000, plus at most one more that finds the end (the stream pulls ahead).
      expect(reads).toBeGreaterThanOrEqual(2);
      expect(reads).toBeLessThanOrEqual(3);
    } finally {
      await local.close();
    }
  });

  it('sends a retry hint, keep-alive comments while idle, and ends at its stream budget', async () => {
    const response = await chat({ message: 'quiet' });
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    const last = (await readSse(response)).events.at(-1)!.id;
    const quiet = createHandlers({ rt: t.rt, authenticate: headerAuth, runSegment: fakeRunSegment(), keepAliveMs: 40, maxStreamMs: 300 });
    const startedAt = Date.now();
    const read = await readSse(await quiet.handle(makeRequest('GET', `/api/threads/${threadId}/events?after=${last}`, { user: 'alice' })));
    expect(read.ended).toBe(true);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(250);
    // 2 s for a dropped connection, sent first; a stream that ends at its budget then asks the
    // client to reconnect at once, so a long answer does not stall for 2 s at each budget.
    expect(read.retries).toEqual([2000, 100]);
    expect(read.comments.filter((c) => c.trim() === 'keep-alive').length).toBeGreaterThanOrEqual(3);
    expect(read.events).toEqual([]);
  });
});

describe('?format=ai-sdk', () => {
  it('the AI SDK chat transport reads the turn as one assistant message', async () => {
    const transport = new DefaultChatTransport<UIMessage>({
      api: 'http://agent-kit.test/api/chat?format=ai-sdk',
      headers: { 'x-user': 'alice' },
      fetch: (input, init) => t.handlers.handle(new Request(input as string, init)),
      prepareSendMessagesRequest: ({ messages }) => ({
        body: { message: messages.at(-1)!.parts.map((p) => (p.type === 'text' ? p.text : '')).join('') },
      }),
    });
    const chunks = await transport.sendMessages({
      chatId: 'c1', trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Tell me' }] }],
    });
    let last: UIMessage | undefined;
    for await (const message of readUIMessageStream<UIMessage>({ stream: chunks, terminateOnError: true })) last = message;
    expect(last!.role).toBe('assistant');
    const text = last!.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text).join('');
    expect(text).toBe('The answer is 42.');
    expect(last!.metadata).toMatchObject({ status: 'completed' });
  });

  it('replays a finished run as a UI message stream from the events route', async () => {
    const response = await chat({ message: 'again' });
    const threadId = response.headers.get('x-agent-kit-thread-id')!;
    await readSse(response);
    const replay = await t.handlers.handle(makeRequest('GET', `/api/threads/${threadId}/events?format=ai-sdk`, { user: 'alice' }));
    expect(replay.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(replay.headers.get('x-agent-kit-run-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(replay.headers.get('access-control-expose-headers')).toBe('x-agent-kit-run-id');
    const read = await readSse(replay);
    expect(read.ended).toBe(true);
    expect(read.events.at(-1)!.data).toBe('[DONE]');
    const chunks = read.events.slice(0, -1).map((e) => JSON.parse(e.data) as { type: string; delta?: string });
    expect(chunks[0]!.type).toBe('data-agent-kit-event');
    expect(chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta).join('')).toBe('The answer is 42.');
    expect(chunks.at(-1)!.type).toBe('finish');
  });

  it('follows the run under way, not a later turn queued behind it (useChat resume on a busy thread)', async () => {
    const first = await startTurn(t.db, { ownerId: 'alice', text: 'first', jobDelayMs: 3_600_000 });
    const second = await startTurn(t.db, {
      ownerId: 'alice', threadId: first.threadId, text: 'second', jobDelayMs: 3_600_000,
    });
    const claim = await claimRun(t.db, { runId: first.runId, owner: 'held-by-test', leaseTtlMs: 3_600_000 });
    if (!claim.claimed) throw new Error(`claim failed: ${claim.reason}`);
    expect((await mirrorPartial(t.db, claim.lease, 'Working on it')).ok).toBe(true);
    const startOf = async () => {
      const abort = new AbortController();
      const response = await t.handlers.handle(makeRequest('GET', `/api/threads/${first.threadId}/events?format=ai-sdk`, {
        user: 'alice', signal: abort.signal,
      }));
      const chunkOf = (e: { data: string }) => JSON.parse(e.data) as { type: string; messageId?: string };
      const read = await readSse(response, { until: (e) => chunkOf(e).type === 'start' });
      abort.abort();
      return read.events.map(chunkOf).find((chunk) => chunk.type === 'start');
    };
    const shown = await startOf();
    expect(shown).toMatchObject({ type: 'start', messageId: first.runId });
    // Once the first turn is over and the second under way, the second is what there is to see.
    await closeRun(t.db, claim.lease, 'completed', { text: 'Working on it. Done.' });
    const next = await claimRun(t.db, { runId: second.runId, owner: 'held-by-test', leaseTtlMs: 3_600_000 });
    if (!next.claimed) throw new Error(`claim failed: ${next.reason}`);
    expect((await mirrorPartial(t.db, next.lease, 'Second')).ok).toBe(true);
    expect(await startOf()).toMatchObject({ type: 'start', messageId: second.runId });
    await closeRun(t.db, next.lease, 'completed', { text: 'Second.' });
  });
});
