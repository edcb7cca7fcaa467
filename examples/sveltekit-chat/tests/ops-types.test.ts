// Unit test of the operator page's runs table: a run's effects cell says how many of its effects
// are in doubt (a payment that may or may not have gone out), and says nothing more otherwise.
import { describe, expect, it } from 'vitest';
import { effectsCell } from '../src/lib/ops-types';

describe('effectsCell', () => {
  it('names the effects in doubt, and only when there are some', () => {
    expect(effectsCell({ effects: 3, inDoubt: 1 })).toEqual({ count: '3', inDoubt: '1 in doubt' });
    expect(effectsCell({ effects: 2, inDoubt: 0 })).toEqual({ count: '2', inDoubt: null });
  });
});
