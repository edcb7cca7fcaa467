// storableText, storableValue, storableResult and StorableTextStream on their own: which UTF-16
// units are replaced, what a value's JSON form is (Dates, BigInts, cycles), and that a surrogate
// pair split between deltas is joined. The engine's use of them is tested in src/turn/unstorable-output.test.ts.
import { describe, expect, it } from 'vitest';
import { openTestDb } from '../../test/harness/test-db.js';
import { storableMessage, storableResult, storableText, StorableTextStream, storableValue } from './storable.js';

const smile = '\u{1F600}'; // a surrogate pair: \uD83D\uDE00

describe('storableText', () => {
  it('replaces each NUL and unpaired surrogate by one U+FFFD, and keeps pairs', () => {
    expect(storableText('a\u0000b')).toBe('a\uFFFDb');
    expect(storableText('\uD800')).toBe('\uFFFD');
    expect(storableText('x\uDC00\uD800y')).toBe('x\uFFFD\uFFFDy'); // low then high: both unpaired
    expect(storableText(`${smile}\uD83D${smile}\uDE00`)).toBe(`${smile}\uFFFD${smile}\uFFFD`);
    expect(storableText('\u0000\u0000')).toBe('\uFFFD\uFFFD');
    const clean = `plain ${smile} text \\u0000 written out`;
    expect(storableText(clean)).toBe(clean);
    expect(storableText('a\u0000\uD800b')).toHaveLength('a\u0000\uD800b'.length);
  });
});

describe('storableValue', () => {
  it('returns the JSON form of a value: what JSON.stringify writes, a BigInt as its digits', () => {
    const value = { text: `ok ${smile}`, list: [1, 'two', null], nested: { literal: '\\u0000 as text' } };
    expect(storableValue(value)).toEqual(value);
    expect(storableValue(value)).not.toBe(value); // a copy: what the engine keeps cannot change under it
    expect(storableValue({ at: new Date(0), id: 10n, ids: [2n ** 64n], gone: undefined, f() {}, n: Number.NaN }))
      .toEqual({ at: '1970-01-01T00:00:00.000Z', id: '10', ids: ['18446744073709551616'], n: null });
    expect(storableValue(null)).toBe(null);
    expect(storableValue(undefined)).toBe(null);
    expect(storableValue(42)).toBe(42);
  });

  it('replaces in strings at any depth, in keys too, and leaves the rest of the value alone', () => {
    const value = { 'k\u0000': ['a\uD800', { deep: 'b\u0000', n: 1, yes: true, none: null }], same: 'c' };
    expect(storableValue(value)).toEqual({ 'k\uFFFD': ['a\uFFFD', { deep: 'b\uFFFD', n: 1, yes: true, none: null }], same: 'c' });
    expect(storableValue('top\u0000')).toBe('top\uFFFD');
  });

  it('throws for a value with no JSON form; storableResult says so instead', () => {
    const cyclic: Record<string, unknown> = { text: 'a\u0000' };
    cyclic.self = cyclic;
    expect(() => storableValue(cyclic)).toThrow(/circular/);
    expect(storableResult(cyclic)).toEqual({
      unstorable: expect.stringMatching(/^the tool ran, but what it returned has no JSON form to keep \(Converting circular structure to JSON\)$/),
    });
    expect(storableResult({ receipt: 'r\u0000', at: new Date(0) })).toEqual({ receipt: 'r\uFFFD', at: '1970-01-01T00:00:00.000Z' });
  });

  it('what it returns, Postgres stores as it is (jsonb and text)', async () => {
    const db = await openTestDb();
    try {
      const value = storableValue({ 'k\u0000': ['a\uD800', `${smile}\u0000`] });
      const [row] = await db.query<{ value: unknown; text: string }>(
        'select $1::jsonb as value, $2::text as text', [JSON.stringify(value), storableText('t\u0000\uDC00')]);
      expect(row).toEqual({ value: { 'k\uFFFD': ['a\uFFFD', `${smile}\uFFFD`] }, text: 't\uFFFD\uFFFD' });
    } finally {
      await db.close();
    }
  });
});

describe('storableResult over its bound', () => {
  const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

  it('keeps a result of exactly the bound whole, and one byte more as its head', () => {
    const text = 'a'.repeat(98); // JSON text: 100 bytes with its quotes
    expect(storableResult(text, 100)).toBe(text);
    const cut = storableResult(`${text}a`, 100) as { truncated: string; head: string };
    expect(cut.truncated).toBe("the tool's result was 101 bytes, over the 100 kept: this is the first 0 characters of its text, cut");
    expect(storableResult({ n: 1 }, 7)).toEqual({ n: 1 });
  });

  it('bounds the head by its escaped size: quotes, backslashes and control characters count as stored', () => {
    for (const unit of ['"', '\\', '\u0001', 'é', smile]) {
      const text = unit.repeat(5_000);
      const cut = storableResult(text, 4_096) as { truncated: string; head: string };
      expect(bytesOf(cut)).toBeLessThanOrEqual(4_096);
      expect(text.startsWith(cut.head)).toBe(true);
      expect(bytesOf(cut.head)).toBeGreaterThan(4_096 - 512 - 12); // within a unit's escape of the budget
    }
  });

  it('never ends the head between the halves of a surrogate pair', () => {
    for (let pad = 0; pad < 8; pad++) {
      const cut = storableResult(`${'x'.repeat(pad)}${smile.repeat(3_000)}`, 2_048) as { head: string };
      expect(storableText(cut.head)).toBe(cut.head);
      expect(cut.head.length).toBeGreaterThan(pad);
    }
  });

  it("cuts a value's JSON text, and a message with a note of its size", () => {
    const cut = storableResult({ rows: Array.from({ length: 500 }, (_, id) => ({ id })) }, 1_024) as { truncated: string; head: string };
    expect(cut.truncated).toMatch(/of its JSON text, cut$/);
    expect(cut.head.startsWith('{"rows":[{"id":0},{"id":1},')).toBe(true);
    expect(storableMessage('short\u0000', 1_024)).toBe('short\uFFFD');
    const message = storableMessage('e'.repeat(3_000), 1_024);
    expect(message).toMatch(/^e+ … \(cut: the message was 3000 bytes\)$/);
    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(1_024);
  });
});

describe('StorableTextStream', () => {
  it('joins a surrogate pair split between two deltas', () => {
    const stream = new StorableTextStream();
    expect(stream.push('a\uD83D')).toBe('a');
    expect(stream.push('\uDE00b')).toBe(`${smile}b`);
    expect(stream.end()).toBe('');
  });

  it('a held high surrogate without its pair becomes U+FFFD, in the next delta or at the end', () => {
    const stream = new StorableTextStream();
    expect(stream.push('\uD83D')).toBe('');
    expect(stream.push('x\u0000')).toBe('\uFFFDx\uFFFD');
    expect(stream.push('y\uD800')).toBe('y');
    expect(stream.end()).toBe('\uFFFD');
    expect(stream.end()).toBe('');
    expect(stream.push('')).toBe('');
  });
});
