// A populated server for the hostile suites: the handlers over a fresh test database (both
// stores) with signed-session auth and the fake engine, and runs in every state the routes care
// about — waiting for input, completed, aborted, taken over — for two users. Built through the
// public routes, then settled, so the snapshot taken afterwards is stable.
import { createParser } from 'eventsource-parser';
import { expect } from 'vitest';
import { cronSecret, openHttpTest, type HttpTest } from '../harness/http-harness.js';
import {
  hostileRequest, operatorName, sessionAuth, snapshotTables, type HostileRequest,
} from './hostile-kit.js';

export interface Ids {
  threadId: string;
  runId: string;
}

export interface HostileFixture {
  t: HttpTest;
  cronSecret: string;
  /** Send a request through `handle` (the router over every route). */
  send(method: string, path: string, options?: HostileRequest): Promise<Response>;
  /** Alice's runs: waiting on question q1, completed, aborted, and taken over by the operator. */
  alice: { waiting: Ids; completed: Ids; aborted: Ids; takenOver: Ids };
  /** Bob's runs: waiting on q1 and completed. Alice and mallory must never learn they exist. */
  bob: { waiting: Ids; completed: Ids };
  snapshot(): Promise<Record<string, string>>;
  close(): Promise<void>;
}

/** Read an SSE response to its end (bounded: the fake engine parks or closes every run). */
async function drain(response: Response): Promise<void> {
  const parser = createParser({ onEvent() {} });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    parser.feed(decoder.decode(value, { stream: true }));
  }
}

export async function openHostileFixture(): Promise<HostileFixture> {
  // The fake engine asks q1 and parks; once answered, the next segment completes the run.
  const t = await openHttpTest({ segment: { askQuestionId: 'q1' }, deps: { authenticate: sessionAuth } });
  const send = (method: string, path: string, options: HostileRequest = {}) =>
    t.handlers.handle(hostileRequest(method, path, options));

  async function chat(user: string, message: string): Promise<Ids> {
    const response = await send('POST', '/api/chat', { user, body: { message } });
    expect(response.status).toBe(200);
    await drain(response);
    await t.handlers.segments.settle();
    return {
      threadId: response.headers.get('x-agent-kit-thread-id')!,
      runId: response.headers.get('x-agent-kit-run-id')!,
    };
  }
  async function act(path: string, user: string, body?: unknown) {
    const response = await send('POST', path, { user, body: body ?? {} });
    expect(response.status, path).toBeLessThan(300);
    await t.handlers.segments.settle();
  }

  const alice = {
    waiting: await chat('alice', 'which account?'),
    completed: await chat('alice', 'done soon'),
    aborted: await chat('alice', 'cancel me'),
    takenOver: await chat('alice', 'an operator will take this'),
  };
  await act(`/api/runs/${alice.completed.runId}/input`, 'alice', { questionId: 'q1', answer: 'savings' });
  await act(`/api/runs/${alice.aborted.runId}/cancel`, 'alice');
  await act(`/api/runs/${alice.takenOver.runId}/takeover`, operatorName);
  const bob = { waiting: await chat('bob', 'bob asks'), completed: await chat('bob', 'bob is done') };
  await act(`/api/runs/${bob.completed.runId}/input`, 'bob', { questionId: 'q1', answer: 'checking' });

  const rows = await t.db.query<{ id: string; status: string }>('select id, status from agent_kit_runs');
  const statusOf = (ids: Ids) => rows.find((r) => r.id === ids.runId)?.status;
  expect([alice.waiting, alice.completed, alice.aborted, alice.takenOver, bob.waiting, bob.completed]
    .map(statusOf)).toEqual([
    'waiting_input', 'completed', 'aborted', 'waiting_takeover', 'waiting_input', 'completed',
  ]);

  return {
    t, cronSecret, send, alice, bob,
    snapshot: () => snapshotTables(t.db),
    close: () => t.close(),
  };
}

/** An id string with every id of the fixture replaced, to compare bodies about different ids. */
export function maskIds(text: string, ids: string[]): string {
  return ids.reduce((acc, id) => acc.split(id).join('<id>'), text);
}
