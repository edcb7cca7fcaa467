// Unit test of the operator page's tables: a run's effects cell says how many of its effects are
// in doubt (a payment that may or may not have gone out), and says nothing more otherwise; an
// effect an operator resolved shows the verdict in words; the URL keeps the filter, the page of
// runs and the selection; the read tells a refused page cursor from a list it cannot read, and
// the store's status line counts what is in flight, and another says when a drain and a reaper
// last looked; a run's tokens read in words; the lease cell says a lease's time left, or when a run
// waiting out a model retry may run again.
import { describe, expect, it } from 'vitest';
import {
  effectResultText, effectsCell, leaseCell, opsHref, opsPageSize, readOps, readOpsQuery, StaleRunsPageError, statusLine,
  passesLine, tokensCell, usageText, type OpsStatus,
} from '../src/lib/ops-types';

describe('statusLine', () => {
  it('counts each status, the expired leases, the due jobs and the effects in doubt, in words', () => {
    const status: OpsStatus = {
      runs: { queued: 2, running: 1, waitingInput: 0, waitingTakeover: 1 },
      expiredLeases: { count: 1, oldestMs: 5 }, dueJobs: { count: 1, oldestMs: 9 },
      inDoubt: { effects: 1, runs: 1 }, lastPass: { drain: null, reap: null }, alerts: [],
    };
    expect(statusLine(status)).toBe(
      '2 queued · 1 running · 0 waiting for input · 1 waiting for takeover · 1 expired lease · 1 job due · 1 effect in doubt');
    expect(statusLine({ ...status, expiredLeases: { count: 0, oldestMs: null }, dueJobs: { count: 3, oldestMs: 1 },
      inDoubt: { effects: 2, runs: 1 } })).toMatch(/ · 0 expired leases · 3 jobs due · 2 effects in doubt$/);
    // The last hour's failures, when there are any: a provider that is down shows at a glance.
    expect(statusLine({ ...status, lastHour: { failed: 0, salvaged: 0 } })).toMatch(/ · 1 effect in doubt$/);
    expect(statusLine({ ...status, lastHour: { failed: 1, salvaged: 2 } }))
      .toMatch(/ · 1 effect in doubt · in the last hour: 1 failed, 2 salvaged$/);
  });
});

describe('passesLine', () => {
  it('says when a drain and a reaper last looked and whose they were, or that none is recorded', () => {
    const status: OpsStatus = {
      runs: { queued: 0, running: 0, waitingInput: 0, waitingTakeover: 0 },
      expiredLeases: { count: 0, oldestMs: null }, dueJobs: { count: 0, oldestMs: null }, inDoubt: { effects: 0, runs: 0 },
      lastPass: { drain: { agoMs: 2_600, owner: 'worker-a' }, reap: null }, alerts: [],
    };
    expect(passesLine(status)).toBe('Last looked: drain 3 s ago (worker-a) · reaper: none recorded');
    const at = (agoMs: number) => passesLine({ ...status, lastPass: { drain: null, reap: { agoMs, owner: 'cron' } } });
    expect([at(119_000), at(150_000), at(7_100_000), at(7_200_000)]).toEqual([
      'Last looked: drain: none recorded · reaper 119 s ago (cron)', 'Last looked: drain: none recorded · reaper 3 min ago (cron)',
      'Last looked: drain: none recorded · reaper 118 min ago (cron)', 'Last looked: drain: none recorded · reaper 2 h ago (cron)',
    ]);
  });
});

describe('tokensCell', () => {
  it('gives the tokens in and out, or a dash for a run whose steps reported none', () => {
    expect(tokensCell({ usage: { inputTokens: 12345, outputTokens: 678 } })).toBe('12,345 / 678');
    expect(tokensCell({ usage: null })).toBe('—');
  });
});

describe('usageText', () => {
  it('gives the tokens in and out, the cached and reasoning ones when there are some, and the steps that reported none', () => {
    expect(usageText({ inputTokens: 1234, outputTokens: 56, modelSteps: 2, reported: 2 })).toBe('1,234 tokens in · 56 out');
    expect(usageText({ inputTokens: 1234, outputTokens: 56, cacheReadTokens: 1000, reasoningTokens: 20, modelSteps: 3, reported: 2 }))
      .toBe('1,234 tokens in (1,000 cached) · 56 out (20 reasoning) · 1 model step unreported');
  });
});

describe('leaseCell', () => {
  const now = Date.parse('2026-12-06T09:00:00Z');
  const at = (offsetMs: number) => new Date(now + offsetMs).toISOString();
  it("gives a running run's time left on its lease, or how long ago it expired", () => {
    expect(leaseCell({ status: 'running', leaseExpiresAt: at(12_300), retryDueAt: null }, now)).toEqual({ text: 'in 12.3 s', expired: false });
    expect(leaseCell({ status: 'running', leaseExpiresAt: at(-4_000), retryDueAt: null }, now)).toEqual({ text: 'expired 4.0 s ago', expired: true });
  });

  it('gives a queued run waiting out a model retry the time left on its wait, and nothing once it is over (ADR-0098)', () => {
    expect(leaseCell({ status: 'queued', leaseExpiresAt: null, retryDueAt: at(27_000) }, now)).toEqual({ text: 'retry in 27.0 s', expired: false });
    expect(leaseCell({ status: 'queued', leaseExpiresAt: null, retryDueAt: at(-1_000) }, now)).toBeNull();
    expect(leaseCell({ status: 'queued', leaseExpiresAt: null, retryDueAt: null }, now)).toBeNull();
    expect(leaseCell({ status: 'completed', leaseExpiresAt: null, retryDueAt: null }, now)).toBeNull();
  });
});

describe('effectsCell', () => {
  it('names the effects in doubt, and only when there are some', () => {
    expect(effectsCell({ effects: 3, inDoubt: 1 })).toEqual({ count: '3', inDoubt: '1 in doubt' });
    expect(effectsCell({ effects: 2, inDoubt: 0 })).toEqual({ count: '2', inDoubt: null });
  });
});

describe('effectResultText', () => {
  it("says who checked an effect in doubt and what they found, with their note", () => {
    const resolved = (happened: boolean, note: string | null) =>
      ({ result: { resolved: { by: 'anna', happened, note, at: '2026-12-01T00:00:00Z' }, inDoubt: { error: 'x' } } });
    expect(effectResultText(resolved(true, 'ch_9'))).toBe('anna checked: it happened (ch_9)');
    expect(effectResultText(resolved(false, null))).toBe('anna checked: it did not happen');
  });

  it('shows any other result as the start of its JSON', () => {
    expect(effectResultText({ result: { chargeId: 'ch_1' } })).toBe('{"chargeId":"ch_1"}');
    expect(effectResultText({ result: null })).toBe('null');
    expect(effectResultText({ result: { resolved: { happened: 'maybe' } } })).toBe('{"resolved":{"happened":"maybe"}}');
    expect(effectResultText({ result: 'x'.repeat(200) })).toHaveLength(80);
  });
});

describe('the page URL', () => {
  it('keeps the filters, the page and the selection across a reload, and reads anything else as none', () => {
    const runId = '0b7c3f4e-9d1a-4c55-8a8e-3f2d1c0b9a87';
    const before = '5d0e8c2a-1b3f-4a6d-9c7e-2f4a6b8d0c1e';
    const thread = '7a1c9e2b-3d4f-4e6a-8b0c-1d2e3f4a5b6c';
    for (const selectedId of [null, runId]) {
      for (const threadId of [null, thread]) {
        for (const inDoubt of [false, true]) {
          for (const page of [null, before]) {
            const query = { selectedId, threadId, inDoubt, before: page };
            expect(readOpsQuery(new URL(opsHref(query), 'http://app.test'))).toEqual(query);
          }
        }
      }
    }
    expect(opsHref({ selectedId: runId, threadId: thread, inDoubt: true, before }))
      .toBe(`/ops?thread=${thread}&inDoubt=1&before=${before}&run=${runId}`);
    expect(opsHref({ selectedId: null, threadId: null, inDoubt: false, before: null })).toBe('/ops');
    expect(readOpsQuery(new URL('http://app.test/ops?inDoubt=yes&before=&thread=latest')))
      .toEqual({ selectedId: null, threadId: null, inDoubt: false, before: null });
  });
});

describe('readOps', () => {
  const before = '5d0e8c2a-1b3f-4a6d-9c7e-2f4a6b8d0c1e';
  const storeStatus: OpsStatus = {
    runs: { queued: 2, running: 1, waitingInput: 0, waitingTakeover: 0 },
    expiredLeases: { count: 0, oldestMs: null }, dueJobs: { count: 1, oldestMs: 40 },
    inDoubt: { effects: 1, runs: 1 }, lastPass: { drain: { agoMs: 1_000, owner: 'w' }, reap: null },
    alerts: [{ kind: 'effects-in-doubt', message: '1 effect is in doubt in 1 run' }],
  };
  /**
   * A fetch that answers the run list with `status` and `body`, GET /api/status with
   * `statusAnswer` (a thrown network error when null), and records what it was asked.
   */
  function fakeFetch(status: number, body: unknown, statusAnswer: [number, unknown] | null = [200, storeStatus]) {
    const asked: string[] = [];
    const fetchFn = (async (url: string) => {
      asked.push(url);
      const json = (code: number, value: unknown) =>
        new Response(JSON.stringify(value), { status: code, headers: { 'content-type': 'application/json' } });
      if (url !== '/api/status') return json(status, body);
      if (!statusAnswer) throw new TypeError('fetch failed');
      return json(...statusAnswer);
    }) as typeof fetch;
    return { fetchFn, asked };
  }

  it('asks for the page, the filter and fifty runs, and the status; hands on the next page\'s cursor', async () => {
    const { fetchFn, asked } = fakeFetch(200, { runs: [], next: before });
    const data = await readOps(fetchFn, { selectedId: null, threadId: null, inDoubt: true, before });
    expect(asked).toEqual([`/api/runs?limit=${opsPageSize}&inDoubt=1&before=${before}`, '/api/status']);
    expect(data).toEqual({ runs: [], next: before, selected: null, status: storeStatus });
  });

  it("asks for one thread's runs with the thread filter (ADR-0095)", async () => {
    const thread = '7a1c9e2b-3d4f-4e6a-8b0c-1d2e3f4a5b6c';
    const { fetchFn, asked } = fakeFetch(200, { runs: [], next: null });
    await readOps(fetchFn, { selectedId: null, threadId: thread, inDoubt: false, before: null });
    expect(asked[0]).toBe(`/api/runs?limit=${opsPageSize}&thread=${thread}`);
  });

  it('shows the runs without the status when the status cannot be read', async () => {
    for (const answer of [[503, { error: { code: 'STORE_UNAVAILABLE', message: 'x' } }] as [number, unknown], null]) {
      const data = await readOps(fakeFetch(200, { runs: [], next: null }, answer).fetchFn,
        { selectedId: null, threadId: null, inDoubt: false, before: null });
      expect(data).toEqual({ runs: [], next: null, selected: null, status: null });
    }
  });

  it('tells a refused page cursor from a list it cannot read', async () => {
    const refused = { error: { code: 'INVALID_ARGUMENT', message: '"before" names no run of this list' } };
    await expect(readOps(fakeFetch(400, refused).fetchFn, { selectedId: null, threadId: null, inDoubt: false, before }))
      .rejects.toThrow(StaleRunsPageError);
    const noPage = readOps(fakeFetch(400, refused).fetchFn, { selectedId: null, threadId: null, inDoubt: false, before: null });
    await expect(noPage).rejects.toThrow('/api/runs answered 400');
    await expect(noPage).rejects.not.toThrow(StaleRunsPageError);
    await expect(readOps(fakeFetch(503, {}).fetchFn, { selectedId: null, threadId: null, inDoubt: false, before }))
      .rejects.toThrow('/api/runs answered 503');
  });
});
