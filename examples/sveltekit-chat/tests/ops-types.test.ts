// Unit test of the operator page's tables: a run's effects cell says how many of its effects are
// in doubt (a payment that may or may not have gone out), and says nothing more otherwise; an
// effect an operator resolved shows the verdict in words; the URL keeps the filter, the page of
// runs and the selection; the read tells a refused page cursor from a list it cannot read.
import { describe, expect, it } from 'vitest';
import {
  effectResultText, effectsCell, opsHref, opsPageSize, readOps, readOpsQuery, StaleRunsPageError,
} from '../src/lib/ops-types';

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
  it('keeps the filter, the page and the selection across a reload, and reads anything else as none', () => {
    const runId = '0b7c3f4e-9d1a-4c55-8a8e-3f2d1c0b9a87';
    const before = '5d0e8c2a-1b3f-4a6d-9c7e-2f4a6b8d0c1e';
    for (const selectedId of [null, runId]) {
      for (const inDoubt of [false, true]) {
        for (const page of [null, before]) {
          const query = { selectedId, inDoubt, before: page };
          expect(readOpsQuery(new URL(opsHref(query), 'http://app.test'))).toEqual(query);
        }
      }
    }
    expect(opsHref({ selectedId: runId, inDoubt: true, before })).toBe(`/ops?inDoubt=1&before=${before}&run=${runId}`);
    expect(opsHref({ selectedId: null, inDoubt: false, before: null })).toBe('/ops');
    expect(readOpsQuery(new URL('http://app.test/ops?inDoubt=yes&before=')))
      .toEqual({ selectedId: null, inDoubt: false, before: null });
  });
});

describe('readOps', () => {
  const before = '5d0e8c2a-1b3f-4a6d-9c7e-2f4a6b8d0c1e';
  /** A fetch that answers the run list with `status` and `body`, and records what it was asked. */
  function fakeFetch(status: number, body: unknown) {
    const asked: string[] = [];
    const fetchFn = (async (url: string) => {
      asked.push(url);
      return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    }) as typeof fetch;
    return { fetchFn, asked };
  }

  it('asks for the page, the filter and fifty runs, and hands on the next page\'s cursor', async () => {
    const { fetchFn, asked } = fakeFetch(200, { runs: [], next: before });
    const data = await readOps(fetchFn, { selectedId: null, inDoubt: true, before });
    expect(asked).toEqual([`/api/runs?limit=${opsPageSize}&inDoubt=1&before=${before}`]);
    expect(data).toEqual({ runs: [], next: before, selected: null });
  });

  it('tells a refused page cursor from a list it cannot read', async () => {
    const refused = { error: { code: 'INVALID_ARGUMENT', message: '"before" names no run of this list' } };
    await expect(readOps(fakeFetch(400, refused).fetchFn, { selectedId: null, inDoubt: false, before }))
      .rejects.toThrow(StaleRunsPageError);
    const noPage = readOps(fakeFetch(400, refused).fetchFn, { selectedId: null, inDoubt: false, before: null });
    await expect(noPage).rejects.toThrow('/api/runs answered 400');
    await expect(noPage).rejects.not.toThrow(StaleRunsPageError);
    await expect(readOps(fakeFetch(503, {}).fetchFn, { selectedId: null, inDoubt: false, before }))
      .rejects.toThrow('/api/runs answered 503');
  });
});
