// Paging back through the run and thread lists (ADR-0044): every door (listRunsPage, `agent-kit
// runs --before`, GET /api/runs?before=; listThreadsPage, GET /api/threads?before=) walks the
// whole list in pages, each row once and in the list's order, ends with no next page, and keeps
// its filters and the caller's scope. Rows created in one statement share their created_at, so
// the order's tie-break (the id) is paged through too. A cursor that names no row of the list
// (unknown, malformed, another owner's) is refused alike, so it tells nobody about rows they
// cannot see. Both stores.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cronSecret, headerAuth, makeRequest } from '../harness/http-harness.js';
import { parseCommandArgs } from '../harness/cli-args.js';
import { fakeRunSegment } from '../harness/fake-segment.js';
import { openTestDb } from '../harness/test-db.js';
import { formatRunsCommand, type RunsOptions } from '../../src/cli/commands/runs.js';
import { configFromEnv } from '../../src/config.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { listRuns, listRunsPage, type ListRunsOptions } from '../../src/event-log/read-runs.js';
import { listThreads, listThreadsPage } from '../../src/event-log/read-threads.js';
import { createHandlers, type Handlers } from '../../src/http/handlers.js';
import { startTurn } from '../../src/queue/start-turn.js';
import type { Db } from '../../src/store/db.js';

let db: Db;
let handlers: Handlers;
/** Every run, in the list's order (newest first), as one unpaged read returns them. */
let all: string[] = [];
let annRuns: string[] = [];
let bobRun = '';
/** Every thread and ann's, in the thread list's order; bob's one thread. */
let allThreads: string[] = [];
let annThreads: string[] = [];
let bobThread = '';

beforeAll(async () => {
  db = await openTestDb();
  handlers = createHandlers({
    rt: { db, model: 'test-model', tools: {}, config: { ...configFromEnv({}), cronSecret } },
    authenticate: headerAuth, runSegment: fakeRunSegment(),
  });
  for (let i = 0; i < 4; i++) await startTurn(db, { ownerId: 'ann', text: `turn ${i}` });
  ({ runId: bobRun, threadId: bobThread } = await startTurn(db, { ownerId: 'bob', text: 'bob asks' }));
  // Five runs of one statement: one created_at, ordered among themselves by id.
  await db.query(
    `with th as (insert into agent_kit_threads (owner_id) select 'ann' from generate_series(1, 5) returning id)
     insert into agent_kit_runs (thread_id, turn_no, status) select id, 1, 'completed' from th`,
  );
  await startTurn(db, { ownerId: 'ann', text: 'newest' });
  all = (await listRuns(db, { ownerId: null, limit: 100 })).map((run) => run.id);
  annRuns = (await listRuns(db, { ownerId: 'ann', limit: 100 })).map((run) => run.id);
  allThreads = (await listThreads(db, { ownerId: null, limit: 100 })).map((thread) => thread.id);
  annThreads = (await listThreads(db, { ownerId: 'ann', limit: 100 })).map((thread) => thread.id);
});
afterAll(async () => {
  await handlers?.segments.settle();
  await db?.close();
});

/** Follow `next` from the first page to the last; the pages' ids. */
async function walk(options: Omit<ListRunsOptions, 'before'>): Promise<string[][]> {
  const pages: string[][] = [];
  let before: string | undefined;
  do {
    const page = await listRunsPage(db, { ...options, before });
    pages.push(page.runs.map((run) => run.id));
    before = page.next ?? undefined;
    expect(pages.length).toBeLessThan(50);
  } while (before);
  return pages;
}

describe('the fixture', () => {
  it('has eleven runs and threads, five of each created in one statement', async () => {
    expect(all).toHaveLength(11);
    expect(annRuns).toHaveLength(10);
    expect(allThreads).toHaveLength(11);
    expect(annThreads).toHaveLength(10);
    const [largest] = await db.query<{ n: number | string }>(
      'select count(*) as n from agent_kit_runs group by created_at order by count(*) desc limit 1');
    expect(Number(largest!.n)).toBe(5);
    const [largestThreads] = await db.query<{ n: number | string }>(
      'select count(*) as n from agent_kit_threads group by created_at order by count(*) desc limit 1');
    expect(Number(largestThreads!.n)).toBe(5);
  });
});

describe('listRunsPage', () => {
  it('walks the whole list, each run once and in order, in pages of any size', async () => {
    for (const limit of [1, 2, 3, 4, 5, 10, 11, 12]) {
      const pages = await walk({ ownerId: null, limit });
      expect(pages.flat(), `limit ${limit}`).toEqual(all);
      expect(pages.slice(0, -1).every((page) => page.length === limit), `limit ${limit}`).toBe(true);
      // A last page that is exactly full says so: no next page leading to an empty one.
      expect(pages.at(-1)!.length, `limit ${limit}`).toBe(all.length - limit * (pages.length - 1));
      expect(pages.at(-1)!.length).toBeGreaterThan(0);
    }
  });

  it('keeps the caller\'s scope and the filters', async () => {
    expect((await walk({ ownerId: 'ann', limit: 3 })).flat()).toEqual(annRuns);
    const completed = (await listRuns(db, { ownerId: null, status: 'completed', limit: 100 })).map((run) => run.id);
    expect(completed).toHaveLength(5);
    expect((await walk({ ownerId: null, status: 'completed', limit: 2 })).flat()).toEqual(completed);
    // A cursor from the unfiltered list is a place in the order, whatever its own status.
    const queuedAfter = await listRunsPage(db, { ownerId: null, status: 'queued', before: all[0], limit: 100 });
    expect(queuedAfter.runs.map((run) => run.id)).toEqual(all.slice(1).filter((id) => !completed.includes(id)));
    expect(queuedAfter.next).toBeNull();
    expect(await listRunsPage(db, { ownerId: null, inDoubt: true, before: all[3], limit: 5 }))
      .toEqual({ runs: [], next: null });
  });

  it('refuses a cursor that names no run of the list, the same way for each', async () => {
    const refusals = [
      { before: '00000000-0000-4000-8000-000000000000', ownerId: null },
      { before: 'not-a-run', ownerId: null },
      { before: '', ownerId: null },
      { before: bobRun, ownerId: 'ann' }, // bob's run exists, but not in ann's list
    ];
    for (const { before, ownerId } of refusals) {
      const read = listRunsPage(db, { ownerId, before, limit: 5 });
      await expect(read, before).rejects.toThrow(InvalidArgumentError);
      await expect(read, before).rejects.toThrow(/^"before" names no run of this list: /);
    }
    expect((await listRunsPage(db, { ownerId: 'bob', before: bobRun, limit: 5 })).runs).toEqual([]);
  });
});

/** Parse `args` with the real `runs` command definition; returns the options it would act on. */
const parseRunsArgs = (args: string[]) => parseCommandArgs<RunsOptions>('runs', args);

describe('agent-kit runs --before', () => {
  it('ends a full page with the command for the next, which the last page does not have', async () => {
    const seen: string[] = [];
    let args = ['--limit', '4'];
    for (let page = 0; page < 10; page++) {
      const text = await formatRunsCommand(db, await parseRunsArgs(args), new Date());
      const lines = text.trimEnd().split('\n');
      const trailer = lines.at(-1)!.startsWith('older runs: ') ? lines.pop()! : null;
      seen.push(...lines.slice(1).map((row) => row.split(/\s{2,}/)[0]!));
      if (!trailer) break;
      expect(trailer).toBe(`older runs: agent-kit runs --limit 4 --before ${seen.at(-1)}`);
      args = trailer.slice('older runs: agent-kit runs '.length).split(' ');
    }
    expect(seen).toEqual(all);
  });

  it('repeats the filters in the next page\'s command', async () => {
    const text = await formatRunsCommand(db, await parseRunsArgs(['--status', 'queued', '--limit', '2']), new Date());
    expect(text.trimEnd().split('\n').at(-1)).toMatch(/^older runs: agent-kit runs --status queued --limit 2 --before [0-9a-f-]{36}$/);
    const inDoubt = await formatRunsCommand(db, { inDoubt: true, before: all[0] }, new Date());
    expect(inDoubt).toBe('no older runs with effects in doubt\n');
    expect(await formatRunsCommand(db, { before: all.at(-1) }, new Date())).toBe('no older runs\n');
  });

  it('prints JSON rows without a trailer, and refuses a --before that is not a run id', async () => {
    const json = JSON.parse(await formatRunsCommand(db, { json: true, limit: 2, before: all[1] }, new Date()));
    expect(json.map((run: { id: string }) => run.id)).toEqual(all.slice(2, 4));
    expect(await parseRunsArgs(['--before', all[1]!])).toEqual({ before: all[1] });
    await expect(parseRunsArgs(['--before', 'latest'])).rejects.toThrow(/--before takes a run id, got "latest"/);
    await expect(formatRunsCommand(db, { before: '00000000-0000-4000-8000-000000000000' }, new Date()))
      .rejects.toThrow(InvalidArgumentError);
  });
});

describe('GET /api/runs?before=', () => {
  async function get(path: string, user = 'ops', operator = true) {
    return handlers.handle(makeRequest('GET', path, { user, operator }));
  }

  it('pages through every run an operator sees, and the owner\'s own for an owner', async () => {
    for (const [user, operator, expected] of [['ops', true, all], ['ann', false, annRuns]] as const) {
      const seen: string[] = [];
      let path = '/api/runs?limit=3';
      for (let page = 0; page < 10; page++) {
        const response = await get(path, user, operator);
        expect(response.status, path).toBe(200);
        const body = (await response.json()) as { runs: { id: string }[]; next: string | null };
        seen.push(...body.runs.map((run) => run.id));
        if (!body.next) break;
        expect(body.next).toBe(seen.at(-1));
        path = `/api/runs?limit=3&before=${body.next}`;
      }
      expect(seen, user).toEqual(expected);
    }
  });

  it('answers 400 for a cursor that is not a run id or not a run of the caller\'s list, alike', async () => {
    const cases: [string, string, boolean, RegExp][] = [
      ['/api/runs?before=latest', 'ops', true, /^invalid query parameter "before"/],
      ['/api/runs?before=', 'ops', true, /^invalid query parameter "before"/],
      ['/api/runs?before=00000000-0000-4000-8000-000000000000', 'ops', true, /^"before" names no run of this list/],
      [`/api/runs?before=00000000-0000-4000-8000-000000000000`, 'ann', false, /^"before" names no run of this list/],
      [`/api/runs?before=${bobRun}`, 'ann', false, /^"before" names no run of this list/],
      [`/api/runs?mine=1&before=${bobRun}`, 'ops', true, /^"before" names no run of this list/],
    ];
    for (const [path, user, operator, message] of cases) {
      const response = await get(path, user, operator);
      expect(response.status, path).toBe(400);
      const { error } = await response.json();
      expect(error.code, path).toBe('INVALID_ARGUMENT');
      expect(error.message, path).toMatch(message);
    }
    // The refusal of another owner's run reads like that of no run at all.
    const unknown = await (await get('/api/runs?before=00000000-0000-4000-8000-000000000000', 'ann', false)).json();
    const bobs = await (await get(`/api/runs?before=${bobRun}`, 'ann', false)).json();
    expect(bobs.error.message.replace(bobRun, 'ID')).toBe(unknown.error.message.replace('00000000-0000-4000-8000-000000000000', 'ID'));
  });
});

describe('listThreadsPage and GET /api/threads?before=', () => {
  async function walkThreads(ownerId: string | null, limit: number): Promise<string[][]> {
    const pages: string[][] = [];
    let before: string | undefined;
    do {
      const page = await listThreadsPage(db, { ownerId, before, limit });
      pages.push(page.threads.map((thread) => thread.id));
      before = page.next ?? undefined;
      expect(pages.length).toBeLessThan(50);
    } while (before);
    return pages;
  }

  it('walks every thread once and in order, an owner\'s or everyone\'s', async () => {
    for (const limit of [1, 2, 3, 5, 10, 11, 12]) {
      const pages = await walkThreads(null, limit);
      expect(pages.flat(), `limit ${limit}`).toEqual(allThreads);
      expect(pages.at(-1)!.length).toBeGreaterThan(0);
      expect((await walkThreads('ann', limit)).flat(), `limit ${limit}`).toEqual(annThreads);
    }
  });

  it('refuses a cursor that names no thread of the list, the same way for each', async () => {
    for (const [before, ownerId] of [
      ['00000000-0000-4000-8000-000000000000', null], ['nope', null], [bobThread, 'ann'], [bobRun, null],
    ] as const) {
      await expect(listThreadsPage(db, { ownerId, before, limit: 5 }), before)
        .rejects.toThrow(/^"before" names no thread of this list: /);
    }
  });

  it('answers { threads, next } over HTTP, paged for the caller and, with ?all=1, for an operator', async () => {
    for (const [user, operator, all, expected] of [
      ['ann', false, '', annThreads], ['ops', true, '&all=1', allThreads],
    ] as const) {
      const seen: string[] = [];
      let path = `/api/threads?limit=4${all}`;
      for (let page = 0; page < 10; page++) {
        const response = await handlers.handle(makeRequest('GET', path, { user, operator }));
        expect(response.status, path).toBe(200);
        const body = (await response.json()) as { threads: { id: string }[]; next: string | null };
        seen.push(...body.threads.map((thread) => thread.id));
        if (!body.next) break;
        path = `/api/threads?limit=4${all}&before=${body.next}`;
      }
      expect(seen, user).toEqual(expected);
    }
    for (const path of ['/api/threads?before=x', `/api/threads?before=${bobThread}`]) {
      const response = await handlers.handle(makeRequest('GET', path, { user: 'ann' }));
      expect(response.status, path).toBe(400);
      expect((await response.json()).error.message, path).toMatch(/"before"/);
    }
  });
});

describe("one thread's runs: listRunsPage({ threadId }), agent-kit runs --thread, GET /api/runs?thread=", () => {
  // Created here, after the tests above walked the fixture's list: cara's thread of three turns,
  // the first completed, and a thread of hers with one turn beside it.
  let thread = '';
  let threadRuns: string[] = [];
  let otherRun = '';
  beforeAll(async () => {
    const first = await startTurn(db, { ownerId: 'cara', text: 'first' });
    thread = first.threadId;
    await fakeRunSegment({ deltas: ['Done.'] })(
      { db, model: 'test-model', tools: {}, config: configFromEnv({}) }, { runId: first.runId, owner: 'list-test' });
    const second = await startTurn(db, { ownerId: 'cara', threadId: thread, text: 'second' });
    const third = await startTurn(db, { ownerId: 'cara', threadId: thread, text: 'third' });
    threadRuns = [third.runId, second.runId, first.runId];
    ({ runId: otherRun } = await startTurn(db, { ownerId: 'cara', text: 'another thread' }));
  });

  it('lists the thread\'s runs newest first, in pages, with the other filters', async () => {
    expect((await listRuns(db, { ownerId: null, threadId: thread, limit: 100 })).map((run) => run.id)).toEqual(threadRuns);
    expect((await walk({ ownerId: null, threadId: thread, limit: 2 })).flat()).toEqual(threadRuns);
    expect((await walk({ ownerId: 'cara', threadId: thread, limit: 1 })).flat()).toEqual(threadRuns);
    expect((await listRuns(db, { ownerId: null, threadId: thread, status: 'completed', limit: 100 })).map((run) => run.id))
      .toEqual([threadRuns[2]]);
    // Another owner's scope holds none of them; nor does a thread that does not exist.
    expect(await listRuns(db, { ownerId: 'ann', threadId: thread, limit: 100 })).toEqual([]);
    expect(await listRuns(db, { ownerId: null, threadId: '00000000-0000-4000-8000-000000000000', limit: 100 })).toEqual([]);
    const caras = (await listRuns(db, { ownerId: 'cara', limit: 100 })).map((run) => run.id);
    expect(caras).toEqual([otherRun, ...threadRuns]);
  });

  it('agent-kit runs --thread prints them, keeps --thread in the next page\'s command, and refuses a malformed id', async () => {
    const text = await formatRunsCommand(db, await parseRunsArgs(['--thread', thread, '--limit', '2']), new Date());
    const lines = text.trimEnd().split('\n');
    expect(lines.slice(1, -1).map((row) => row.split(/\s{2,}/)[0])).toEqual(threadRuns.slice(0, 2));
    expect(lines.at(-1)).toBe(`older runs: agent-kit runs --thread ${thread} --limit 2 --before ${threadRuns[1]}`);
    const next = await formatRunsCommand(db, await parseRunsArgs(lines.at(-1)!.slice('older runs: agent-kit runs '.length).split(' ')), new Date());
    expect(next.trimEnd().split('\n').slice(1).map((row) => row.split(/\s{2,}/)[0])).toEqual([threadRuns[2]]);
    const json = JSON.parse(await formatRunsCommand(db, { json: true, thread }, new Date())) as { id: string; threadId: string }[];
    expect(json.map((run) => [run.id, run.threadId])).toEqual(threadRuns.map((id) => [id, thread]));
    const nowhere = '00000000-0000-4000-8000-000000000000';
    expect(await formatRunsCommand(db, { thread: nowhere }, new Date())).toBe(`no runs of thread ${nowhere}\n`);
    expect(await formatRunsCommand(db, { thread, inDoubt: true }, new Date())).toBe(`no runs of thread ${thread} with effects in doubt\n`);
    await expect(parseRunsArgs(['--thread', 'latest'])).rejects.toThrow(/--thread takes a thread id, got "latest"/);
  });

  it('GET /api/runs?thread= lists them for an operator and their owner, none for another user; a malformed id is a 400', async () => {
    const ids = async (path: string, user: string, operator: boolean) => {
      const response = await handlers.handle(makeRequest('GET', path, { user, operator }));
      expect(response.status, path).toBe(200);
      return ((await response.json()) as { runs: { id: string }[] }).runs.map((run) => run.id);
    };
    expect(await ids(`/api/runs?thread=${thread}`, 'ops', true)).toEqual(threadRuns);
    expect(await ids(`/api/runs?thread=${thread}`, 'cara', false)).toEqual(threadRuns);
    expect(await ids(`/api/runs?thread=${thread}&status=queued&limit=1`, 'cara', false)).toEqual([threadRuns[0]]);
    expect(await ids(`/api/runs?thread=${thread}`, 'ann', false)).toEqual([]);
    for (const bad of ['latest', '', `${thread}x`]) {
      const response = await handlers.handle(makeRequest('GET', `/api/runs?thread=${bad}`, { user: 'ops', operator: true }));
      expect(response.status, bad).toBe(400);
      expect((await response.json()).error.message, bad).toMatch(/^invalid query parameter "thread"/);
    }
  });
});
