// Unit test of the operator page's tables: a run's effects cell says how many of its effects are
// in doubt (a payment that may or may not have gone out), and says nothing more otherwise; an
// effect an operator resolved shows the verdict in words.
import { describe, expect, it } from 'vitest';
import { effectResultText, effectsCell, opsHref, readOpsQuery } from '../src/lib/ops-types';

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
  it('keeps the filter and the selection across a reload, and reads anything else as neither', () => {
    const runId = '0b7c3f4e-9d1a-4c55-8a8e-3f2d1c0b9a87';
    for (const query of [
      { selectedId: null, inDoubt: false }, { selectedId: runId, inDoubt: false },
      { selectedId: null, inDoubt: true }, { selectedId: runId, inDoubt: true },
    ]) {
      expect(readOpsQuery(new URL(opsHref(query), 'http://app.test'))).toEqual(query);
    }
    expect(opsHref({ selectedId: runId, inDoubt: true })).toBe(`/ops?inDoubt=1&run=${runId}`);
    expect(opsHref({ selectedId: null, inDoubt: false })).toBe('/ops');
    expect(readOpsQuery(new URL('http://app.test/ops?inDoubt=yes'))).toEqual({ selectedId: null, inDoubt: false });
  });
});
