// fast-check generators of hostile input: SQL-looking and control-character strings, values of
// the wrong type, deeply nested JSON, huge strings around the limits, random bytes, wrong
// content types, forged session cookies and near-miss bearer secrets.
import crypto from 'node:crypto';
import fc from 'fast-check';
import { signSession } from './hostile-kit.js';

/** Strings an attacker tries on a text field or an id. */
export const sqlStrings = [
  "'; drop table agent_kit_runs; --",
  "' or '1'='1",
  "1' or 1=1 --",
  "00000000-0000-0000-0000-000000000000' or '1'='1",
  "x'); delete from agent_kit_threads; --",
  '$$; truncate agent_kit_jobs; $$',
  "1; select pg_sleep(10); --",
  "' union select owner_id, id::text from agent_kit_threads --",
  '\\x27; drop table agent_kit_messages; --',
  "%' and 1=0 --",
  '{"$ne": null}',
  '../../../../etc/passwd',
  '<script>alert(1)</script>',
];

/**
 * SQL-looking text, control characters (NUL too: Postgres refuses it, a 400), lone surrogates,
 * emoji and right-to-left marks.
 */
export const nastyText = fc.oneof(
  fc.constantFrom(...sqlStrings),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
  fc.constantFrom('\ud800', 'a\udfffb', '\u202e\u202d', '😀'.repeat(5), '\u0001\u0002\u001f', '\r\n\r\n', ' ',
    'a\u0000b'),
);

/** A string that is not a uuid. */
export const notUuid = fc.oneof(
  fc.constantFrom(...sqlStrings),
  fc.string({ maxLength: 60 }),
  fc.constantFrom('', ' ', 'null', 'undefined', '0', '-1', '1e309', 'NaN', 'true', '[]', '{}',
    '00000000-0000-0000-0000-00000000000', '00000000-0000-0000-0000-0000000000000',
    'g0000000-0000-0000-0000-000000000000', '{00000000-0000-0000-0000-000000000000}',
    '00000000000000000000000000000000'),
).filter((s) => !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s));

/** Any JSON value that is not a string. */
export const notString = fc.oneof(
  fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
);

/** A JSON text nested `depth` levels deep (arrays or objects). */
export const deepJson = fc.record({
  depth: fc.integer({ min: 1_000, max: 30_000 }),
  kind: fc.constantFrom('array', 'object'),
}).map(({ depth, kind }) => (kind === 'array'
  ? `${'['.repeat(depth)}${']'.repeat(depth)}`
  : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`));

/** Characters with different UTF-8 and JSON sizes, to fill a string near the limits. */
const fillers = ['x', 'é', '字', '😀', '"', '\\', '\u0001', ' a'];

/** A huge string: `length` UTF-16 units of one filler, near or over 32 000 chars / 64 KiB. */
export const hugeString = fc.record({
  filler: fc.constantFrom(...fillers),
  length: fc.oneof(
    fc.integer({ min: 32_001, max: 33_000 }),
    fc.integer({ min: 60_000, max: 70_000 }),
    fc.constantFrom(32_001, 65_536, 100_000, 1_000_000),
  ),
}).map(({ filler, length }) => filler.repeat(Math.ceil(length / filler.length)).slice(0, length));

/** Raw bodies that are not JSON: random bytes (often invalid UTF-8) and near-JSON text. */
export const notJsonBody: fc.Arbitrary<string | Uint8Array> = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 300 }),
  fc.constantFrom('{', '{"message":', '{"message": "hi"', "{'message': 'hi'}", 'message=hi', 'null x',
    '{"message":"hi"}}', '[1,]', 'NaN', '{"message":"\\ud800"', '\u0000'),
  fc.string({ unit: 'binary', maxLength: 200 }).filter((s) => {
    try {
      JSON.parse(s);
      return false;
    } catch {
      return true;
    }
  }),
);

/** Content types that are not application/json. */
export const wrongContentType = fc.oneof(
  fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x',
    'application/jsonp', 'application/json-patch+json', 'text/json', 'application/xml', 'json',
    'application/ json', 'application', '*/*', 'text/html; charset=utf-8', ' ', 'application/javascript'),
  fc.string({ maxLength: 40 }).filter((s) => !/^application\/json\s*(;|$)/i.test(s.trim())),
);

/** A Cookie header whose session must not verify. */
export const forgedCookie = (victim: string) => fc.oneof(
  fc.constant(''),
  fc.constant('ak_session='),
  fc.string({ maxLength: 80 }).map((s) => `ak_session=${s}`),
  fc.constant(`ak_session=${signSession(victim, { secret: crypto.randomBytes(32) })}`), // other key
  fc.constant(`ak_session=${signSession(victim, { expMs: Date.now() - 1 })}`), // expired
  fc.constant(`ak_session=${tamper(signSession('mallory'), victim)}`), // payload swapped
  fc.constant(`ak_session=${signSession(victim).slice(0, -2)}`), // truncated mac
  fc.constant(`ak_session=${signSession(victim).split('.')[0]}`), // no mac
  fc.constant(`ak_session=${signSession(victim)}.extra`),
  fc.constant(`ak_session=${signSession(123)}`), // signed, but sub is not a name
  fc.constant(`ak_session=${signSession('a'.repeat(41))}`),
  fc.constant(`ak_session=${'A'.repeat(8_000)}.${'B'.repeat(43)}`), // very long
  fc.constant(`AK_SESSION=${signSession(victim)}`), // wrong cookie name
  fc.constant(`session=${signSession(victim)}`),
);

/** Keep the mac of one session and put another user's payload in front of it. */
function tamper(token: string, sub: string): string {
  const [, mac] = token.split('.');
  const payload = Buffer.from(JSON.stringify({ sub, exp: Date.now() + 3_600_000 })).toString('base64url');
  return `${payload}.${mac}`;
}

/** Authorization headers that must not pass as `Bearer <secret>`. */
export const forgedBearer = (secret: string) => fc.oneof(
  fc.constantFrom(
    `Bearer ${secret}x`, `Bearer ${secret.slice(0, -1)}`, `Bearer ${secret.toUpperCase()}`, `Bearer x${secret}`,
    `Basic ${secret}`, `${secret}`, 'Bearer', 'Bearer ', `Bearer ${secret.slice(1)}`,
    `Bearer ${Buffer.from(secret).toString('base64')}`, `Token ${secret}`, `Bearer "${secret}"`,
    `Bearer ${secret};`, `Bearer ${secret} ${secret}`, `Bearer\t${secret}x`, `Bearer ${'x'.repeat(60_000)}`,
  ).filter((h) => h !== `Bearer ${secret}`),
  fc.integer({ min: 0, max: secret.length - 1 }).chain((i) =>
    fc.string({ minLength: 1, maxLength: 1 }).filter((c) => c !== secret[i] && c.trim() !== '')
      .map((c) => `Bearer ${secret.slice(0, i)}${c}${secret.slice(i + 1)}`)),
  fc.string({ maxLength: 100 }).map((s) => `Bearer ${s}`)
    .filter((h) => h.trim() !== `Bearer ${secret}` && !['\r', '\n', '\u0000'].some((c) => h.includes(c))),
);
