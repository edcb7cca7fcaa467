// Hostile bodies on the routes that read one (POST /api/chat, /api/runs/:id/input, /resolve-effect, and
// /cancel, whose body may be left out), on
// both stores, generated with fast-check: any JSON value, each field with the wrong type, huge
// strings around the 32 000-character and 64 KiB limits, deep nesting, bytes that are not JSON
// or not UTF-8, wrong content types and lying lengths. Each is a 400/404/409/413/415 with a JSON
// error body, and the snapshot of every agent_kit_ table is unchanged after each one.
import crypto from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelBodySchema, chatBodySchema, inputBodySchema, resolveEffectBodySchema } from '../../src/http/request.js';
import { isBlank } from '../../src/blank.js';
import {
  deepJson, hugeString, nastyText, notJsonBody, notString, notUuid, wrongContentType,
} from './arbitraries.js';
import {
  expectNothingWritten, expectRefusal, hostileRuns, operatorName, Tally, type HostileRequest,
} from './hostile-kit.js';
import { openHostileFixture, type HostileFixture } from './hostile-fixture.js';

const tally = new Tally('bodies');
let f: HostileFixture;
let before: Record<string, string>;
const bodyLimit = 64 * 1024;

beforeAll(async () => {
  f = await openHostileFixture();
  before = await f.snapshot();
});
afterAll(async () => {
  tally.report();
  await f?.close();
});

const utf8Bytes = (text: string) => Buffer.byteLength(text, 'utf8');
const hasLoneSurrogate = (json: string) => /\\ud[89a-f][0-9a-f]{2}/i.test(json);
const hasNul = (value: unknown) => JSON.stringify(value).includes('\\u0000');

/** Send one hostile request as alice and check the refusal and that nothing was written. */
async function refused(
  route: string, what: string, method: string, path: string, options: HostileRequest,
  expected: readonly number[],
) {
  const response = await f.send(method, path, { user: 'alice', ...options });
  const refusal = await expectRefusal(tally, route, what, response, expected);
  await expectNothingWritten(tally, route, what, f.t.db, before);
  return refusal;
}

const runs = { numRuns: hostileRuns };
const chatRoute = 'POST /api/chat';
const inputRoute = 'POST /api/runs/:id/input';
const resolveRoute = 'POST /api/runs/:id/resolve-effect';
const inputPath = () => `/api/runs/${f.alice.waiting.runId}/input`;

/** Bodies a valid-looking chat must not slip through with: they name a thread nobody has. */
const unknownThread = () => crypto.randomUUID();

describe('POST /api/chat bodies', () => {
  it('any JSON value that is not a valid chat body is a 400', async () => {
    await fc.assert(fc.asyncProperty(
      fc.jsonValue().filter((v) => !chatBodySchema.safeParse(v).success),
      async (value) => {
        const raw = JSON.stringify(value);
        const expected = utf8Bytes(raw) > bodyLimit ? [413] : [400];
        await refused(chatRoute, 'arbitrary JSON value', 'POST', '/api/chat', { raw }, expected);
      }), runs);
  });

  it('each field with a wrong type or out of range is a 400', async () => {
    const wrongField = fc.oneof(
      fc.record({
        message: fc.oneof(notString, fc.constantFrom('', ' ', '\n\t '), hugeString.map((s) => s.slice(0, 32_500))),
      }),
      fc.record({ message: fc.constant('hi'), threadId: fc.oneof(notString, notUuid) }),
      fc.record({
        message: fc.constant('hi'), threadId: fc.constant(unknownThread()),
        clientMessageId: fc.oneof(notString, fc.constant(''), fc.string({ minLength: 201, maxLength: 400 })),
      }),
    ).filter((v) => !chatBodySchema.safeParse(v).success);
    await fc.assert(fc.asyncProperty(wrongField, async (body) => {
      const expected = utf8Bytes(JSON.stringify(body)) > bodyLimit ? [413] : [400];
      await refused(chatRoute, 'field of the wrong type or size', 'POST', '/api/chat', { body }, expected);
    }), runs);
  });

  it('huge strings around the limits are a 400 (over 32 000 chars) or a 413 (over 64 KiB)', async () => {
    const field = fc.constantFrom('message', 'clientMessageId', 'threadId');
    await fc.assert(fc.asyncProperty(hugeString, field, async (text, name) => {
      const body = { message: 'hi', threadId: unknownThread(), [name]: text };
      const expected = utf8Bytes(JSON.stringify(body)) > bodyLimit ? [413] : [400];
      await refused(chatRoute, `huge ${name}`, 'POST', '/api/chat', { body }, expected);
    }), { numRuns: Math.max(10, Math.floor(hostileRuns / 2)) });
  });

  it('a message of valid length whose UTF-8 exceeds 64 KiB is a 413, not a 500', async () => {
    // 22 000-32 000 three- or four-byte characters: within maxMessageChars, over maxBodyBytes.
    const wide = fc.record({
      filler: fc.constantFrom('字', '😀', '\u0001'), length: fc.integer({ min: 22_000, max: 32_000 }),
    })
      .map(({ filler, length }) => filler.repeat(Math.ceil(length / filler.length)).slice(0, length))
      .filter((s) => s.length <= 32_000 && utf8Bytes(JSON.stringify({ message: s })) > bodyLimit);
    await fc.assert(fc.asyncProperty(wide, async (message) => {
      const body = { message, threadId: unknownThread() };
      await refused(chatRoute, 'valid-length message over 64 KiB in UTF-8', 'POST', '/api/chat', { body }, [413]);
    }), { numRuns: Math.max(5, Math.floor(hostileRuns / 4)) });
  });

  it('deeply nested JSON is refused without a stack overflow', async () => {
    await fc.assert(fc.asyncProperty(deepJson, fc.constantFrom('message', 'extra'), async (deep, where) => {
      const raw = where === 'message'
        ? `{"message":${deep}}`
        : `{"message":"hi","threadId":"${unknownThread()}","extra":${deep}}`;
      const expected = utf8Bytes(raw) > bodyLimit ? [413] : [400]; // (an unknown key is a 400 too)
      await refused(chatRoute, `deep nesting in ${where}`, 'POST', '/api/chat', { raw }, expected);
    }), { numRuns: Math.max(5, Math.floor(hostileRuns / 4)) });
  });

  it('SQL-looking and control-character text in a valid body only ever reaches an unknown thread (404)', async () => {
    await fc.assert(fc.asyncProperty(nastyText, nastyText, async (message, clientMessageId) => {
      const text = isBlank(message) ? `${message}x` : message;
      const body = { message: text, clientMessageId, threadId: unknownThread() };
      const expected = hasNul(body) ? [400] : [404]; // Postgres text cannot hold U+0000
      await refused(chatRoute, 'SQL-looking or control text', 'POST', '/api/chat', { body }, expected);
    }), runs);
  });

  sharedBodyCases(chatRoute, () => '/api/chat', { message: 'hi', threadId: crypto.randomUUID() });
});

describe('POST /api/chat bodies that regenerate a reply (ADR-0091)', () => {
  it('a regenerate of the wrong shape is a 400: a non-boolean flag, no thread, no message named', async () => {
    const shapes = fc.oneof(
      fc.record({ threadId: fc.constant(unknownThread()), clientMessageId: fc.constant('m1'), regenerate: notString }),
      fc.record({ regenerate: fc.constant(true), clientMessageId: fc.option(nastyText, { nil: undefined }) }, { requiredKeys: ['regenerate'] }),
      fc.record({ regenerate: fc.constant(true), threadId: fc.constant(unknownThread()), message: fc.option(fc.constant('hi'), { nil: undefined }) },
        { requiredKeys: ['regenerate', 'threadId'] }),
      fc.record({ regenerate: fc.constant(true), threadId: fc.oneof(notString, notUuid), clientMessageId: fc.constant('m1') }),
      // The reply it replaces (ADR-0092): a run id, and only with regenerate.
      fc.record({ regenerate: fc.constant(true), threadId: fc.constant(unknownThread()), clientMessageId: fc.constant('m1'), replaces: fc.oneof(notString, notUuid) }),
      fc.record({ threadId: fc.constant(unknownThread()), message: fc.constant('hi'), replaces: fc.uuid() }),
    ).filter((v) => !chatBodySchema.safeParse(v).success);
    await fc.assert(fc.asyncProperty(shapes, async (body) => {
      await refused(chatRoute, 'regenerate of the wrong shape', 'POST', '/api/chat', { body }, [400]);
    }), runs);
  });

  it('SQL-looking and control-character message names find no message in the caller\'s own thread (404)', async () => {
    await fc.assert(fc.asyncProperty(nastyText, async (clientMessageId) => {
      const body = { regenerate: true, threadId: f.alice.completed.threadId, clientMessageId };
      await refused(chatRoute, 'regenerate naming SQL-looking or control text', 'POST', '/api/chat', { body },
        hasNul(body) ? [400] : [404]);
    }), runs);
  });

  it('another user\'s message is not found, and a turn under way is a 409, writing nothing', async () => {
    const firstMessage = async (threadId: string) => (await f.t.db.query<{ id: string }>(
      `select id from agent_kit_messages where thread_id = $1 and role = 'user' order by created_at limit 1`, [threadId]))[0]!.id;
    const cases: Array<[string, unknown, number]> = [
      ["bob's message", { regenerate: true, threadId: f.bob.completed.threadId, clientMessageId: await firstMessage(f.bob.completed.threadId) }, 404],
      ["bob's message in alice's thread", { regenerate: true, threadId: f.alice.completed.threadId, clientMessageId: await firstMessage(f.bob.completed.threadId) }, 404],
      ['a turn waiting for an answer', { regenerate: true, threadId: f.alice.waiting.threadId, clientMessageId: await firstMessage(f.alice.waiting.threadId) }, 409],
      ['a turn an operator holds', { regenerate: true, threadId: f.alice.takenOver.threadId, clientMessageId: await firstMessage(f.alice.takenOver.threadId) }, 409],
      // Naming bob's run as the reply replaced finds no such run in alice's thread.
      ["bob's run as the reply replaced", { regenerate: true, threadId: f.alice.completed.threadId,
        clientMessageId: await firstMessage(f.alice.completed.threadId), replaces: f.bob.completed.runId }, 404],
    ];
    for (const [what, body, status] of cases) await refused(chatRoute, `regenerate ${what}`, 'POST', '/api/chat', { body }, [status]);
  });
});

describe('POST /api/runs/:id/input bodies (on the caller\'s own waiting run)', () => {
  it('any JSON value that is not a valid answer is a 400', async () => {
    await fc.assert(fc.asyncProperty(
      fc.jsonValue().filter((v) => !inputBodySchema.safeParse(v).success),
      async (value) => {
        const raw = JSON.stringify(value);
        const expected = utf8Bytes(raw) > bodyLimit ? [413] : [400];
        await refused(inputRoute, 'arbitrary JSON value', 'POST', inputPath(), { raw }, expected);
      }), runs);
  });

  it('wrong types, both answer and approval, extra keys and huge answers are a 400 or 413', async () => {
    const bad = fc.oneof(
      fc.record({
        questionId: fc.oneof(notString, fc.constant(''), fc.string({ minLength: 201, maxLength: 300 })),
        answer: fc.constant('x'),
      }),
      fc.record({ questionId: fc.constant('q1'), answer: fc.oneof(notString, fc.constant('')) }),
      fc.record({ questionId: fc.constant('q1'), approved: fc.oneof(fc.integer(), fc.string(), fc.constant(null)) }),
      fc.record({ questionId: fc.constant('q1'), answer: fc.constant('x'), approved: fc.boolean() }),
      fc.record({
        questionId: fc.constant('q1'), answer: fc.constant('x'), [crypto.randomUUID().slice(0, 6)]: fc.jsonValue(),
      }),
      fc.record({ questionId: fc.constant('q1'), answer: hugeString }),
    ).filter((v) => !inputBodySchema.safeParse(v).success);
    await fc.assert(fc.asyncProperty(bad, async (body) => {
      const expected = utf8Bytes(JSON.stringify(body)) > bodyLimit ? [413] : [400];
      await refused(inputRoute, 'field of the wrong type or size', 'POST', inputPath(), { body }, expected);
    }), runs);
  });

  it('a body with both an answer and an approval says so, not only "invalid input"', async () => {
    for (const approved of [true, false]) {
      const body = { questionId: 'q1', answer: 'yes', approved };
      const refusal = await refused(inputRoute, 'both answer and approval', 'POST', inputPath(), { body }, [400]);
      expect(refusal.message).toMatch(/^invalid body: send an answer or an approval, not both: /);
    }
  });

  it('a valid answer to a question the run did not ask is a 409', async () => {
    await fc.assert(fc.asyncProperty(
      nastyText.filter((q) => q !== 'q1' && q.length <= 200),
      fc.oneof(nastyText.map((answer) => ({ answer })), fc.boolean().map((approved) => ({ approved }))),
      async (questionId, data) => {
        // Postgres's JSON parser refuses a lone surrogate in the stored answer first (a 400).
        // A blank answer (white space, invisible characters) is refused as blank.
        const blank = 'answer' in data && isBlank(data.answer);
        const expected = hasNul([questionId, data]) || blank ? [400]
          : hasLoneSurrogate(JSON.stringify(data)) ? [400, 409] : [409];
        const body = { questionId, ...data };
        await refused(inputRoute, 'answer to another question', 'POST', inputPath(), { body }, expected);
      }), runs);
  });

  sharedBodyCases(inputRoute, inputPath, { questionId: 'q9', answer: 'x' });
});

describe("POST /api/runs/:id/resolve-effect bodies (an operator's, on a run without effects)", () => {
  const resolvePath = () => `/api/runs/${f.alice.completed.runId}/resolve-effect`;

  it('any JSON value that is not a verdict, or has a field of the wrong type or size, is a 400', async () => {
    const bad = fc.oneof(
      fc.jsonValue(),
      fc.record({ key: fc.oneof(notString, fc.constant(''), fc.string({ minLength: 501, maxLength: 600 })), happened: fc.boolean() }),
      fc.record({ key: fc.constant('k'), happened: fc.oneof(notString, fc.string(), fc.constant(null)) }),
      fc.record({ key: fc.constant('k'), happened: fc.boolean(), note: fc.oneof(notString, hugeString) }),
      fc.record({ key: fc.constant('k'), happened: fc.boolean(), [crypto.randomUUID().slice(0, 6)]: fc.jsonValue() }),
    ).filter((v) => !resolveEffectBodySchema.safeParse(v).success);
    await fc.assert(fc.asyncProperty(bad, async (value) => {
      const raw = JSON.stringify(value);
      const expected = utf8Bytes(raw) > bodyLimit ? [413] : [400];
      await refused(resolveRoute, 'not a verdict', 'POST', resolvePath(), { raw, user: operatorName }, expected);
    }), runs);
  });

  it('a valid verdict on an effect the run does not have is a 404', async () => {
    await fc.assert(fc.asyncProperty(
      nastyText.filter((key) => key.length <= 500), fc.boolean(), fc.option(nastyText.map((t) => t.slice(0, 2000))),
      async (key, happened, note) => {
        const body = { key, happened, ...(note === null ? {} : { note }) };
        const expected = hasNul([key, note]) ? [400] : [404];
        await refused(resolveRoute, 'verdict on no effect', 'POST', resolvePath(), { body, user: operatorName }, expected);
      }), runs);
  });

  sharedBodyCases(resolveRoute, resolvePath, { key: 'k', happened: true }, operatorName);
});

describe('POST /api/runs/:id/cancel bodies (on a closed run, which a valid cancel finds closed: 409)', () => {
  const cancelRoute = 'POST /api/runs/:id/cancel';
  const cancelPath = () => `/api/runs/${f.alice.completed.runId}/cancel`;

  it('any JSON value that is not { shownSeq: a seq } is a 400; none, or a valid one, reaches the run', async () => {
    const bad = fc.oneof(
      fc.jsonValue(),
      fc.jsonValue({ maxDepth: 1 }).map((shownSeq) => ({ shownSeq })),
      fc.oneof(fc.integer({ max: -1 }), fc.double({ noInteger: true }), fc.constant(2 ** 53)).map((shownSeq) => ({ shownSeq })),
    ).filter((v) => !cancelBodySchema.safeParse(v).success);
    await fc.assert(fc.asyncProperty(bad, async (value) => {
      const raw = JSON.stringify(value);
      const expected = utf8Bytes(raw) > bodyLimit ? [413] : [400];
      await refused(cancelRoute, 'not a shown seq', 'POST', cancelPath(), { raw }, expected);
    }), runs);
    for (const [what, options] of [
      ['no body and no content type', { headers: { 'content-type': '' } }],
      ['an empty object', { body: {} }],
      ['a shown seq', { body: { shownSeq: 12 } }],
    ] as [string, HostileRequest][]) {
      await refused(cancelRoute, `${what} on a closed run`, 'POST', cancelPath(), options, [409]);
    }
  });

  sharedBodyCases(cancelRoute, cancelPath, { shownSeq: 3 });
});

/** Non-JSON bytes, wrong content types, empty and lying bodies: the same on every body route. */
function sharedBodyCases(route: string, path: () => string, validish: Record<string, unknown>, user = 'alice') {
  it('bytes that are not JSON or not UTF-8 are a 400', async () => {
    await fc.assert(fc.asyncProperty(notJsonBody, async (raw) => {
      await refused(route, 'not JSON / not UTF-8', 'POST', path(), { raw, user }, [400]);
    }), runs);
  });

  it('a body that is not sent as application/json is a 415, whatever it holds', async () => {
    await fc.assert(fc.asyncProperty(wrongContentType, async (type) => {
      const headers = { 'content-type': type.trim() === '' ? '' : type };
      await refused(route, 'wrong content type', 'POST', path(), { body: validish, headers, user }, [415]);
    }), runs);
  });

  it('empty, missing-type, declared-oversized and streamed-oversized bodies are refused', async () => {
    const big = JSON.stringify({ ...validish, pad: 'p'.repeat(bodyLimit) });
    const cases: [string, HostileRequest, number][] = [
      ['empty body', { raw: '' }, 400],
      ['no body at all', { headers: { 'content-type': 'application/json' } }, 400],
      ['no content type', { raw: JSON.stringify(validish), headers: { 'content-type': '' } }, 415],
      ['a charset other than UTF-8', { raw: JSON.stringify(validish), headers: { 'content-type': 'application/json; charset=latin1' } }, 415],
      ['declared length over 64 KiB',
        { raw: JSON.stringify(validish), headers: { 'content-length': String(bodyLimit + 1) } }, 413],
      ['body over 64 KiB', { raw: big }, 413],
      ['body over 64 KiB, declared small', { raw: big, headers: { 'content-length': '10' } }, 413],
    ];
    for (const [what, options, status] of cases) {
      await refused(route, what, 'POST', path(), { ...options, user }, [status]);
    }
  });
}

describe('NUL characters', () => {
  // Postgres text and jsonb cannot hold U+0000 (SQLSTATE 22021/22P05): such input is a 400 and
  // nothing is written. (It was a 500 until errors.ts mapped those codes; found by this suite.)
  it('a NUL in a message, client message id, question id, answer or verdict is a 400 and writes nothing', async () => {
    const resolvePath = `/api/runs/${f.alice.completed.runId}/resolve-effect`;
    const cases: [string, string, Record<string, unknown>, string?][] = [
      [chatRoute, '/api/chat', { message: 'a\u0000b' }],
      [chatRoute, '/api/chat', { message: 'hi', clientMessageId: 'c\u0000', threadId: unknownThread() }],
      [inputRoute, inputPath(), { questionId: 'q1', answer: 'a\u0000b' }],
      [inputRoute, inputPath(), { questionId: 'q\u00001', answer: 'x' }],
      [resolveRoute, resolvePath, { key: 'k\u0000', happened: true }, operatorName],
      [resolveRoute, resolvePath, { key: 'k', happened: false, note: 'a\u0000b' }, operatorName],
    ];
    for (const [route, path, body, user] of cases) {
      await refused(route, 'NUL character', 'POST', path, { body, ...(user ? { user } : {}) }, [400]);
    }
  });
});
