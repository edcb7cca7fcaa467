// Input at the HTTP edge: every body and parameter is checked before anything is written. Bodies
// are JSON, at most maxBodyBytes (checked while reading, before parsing), and validated with zod.
import { z } from 'zod';
import { isBlank } from '../blank.js';
import { maxMessageChars } from '../queue/start-turn.js';
import { HttpError } from './http-error.js';

/** Default body limit: a 32 000-character message in UTF-8 plus its envelope fits. */
export const defaultMaxBodyBytes = 64 * 1024;

/** Read the body as text, refusing a wrong content type (415) or more than `maxBytes` (413). */
export async function readBodyText(request: Request, maxBytes: number): Promise<string> {
  const type = request.headers.get('content-type') ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new HttpError('UNSUPPORTED_MEDIA_TYPE', type ? `send the body as application/json, not "${type}"` : withoutType);
  }
  // JSON is UTF-8 (RFC 8259): a body declared in another charset would be read wrong, not as sent.
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(type)?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
    throw new HttpError('UNSUPPORTED_MEDIA_TYPE', `send the body as UTF-8 JSON, not charset "${charset}"`);
  }
  const bytes = await readBodyBytes(request, maxBytes);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new HttpError('INVALID_ARGUMENT', 'the body is not valid UTF-8');
  }
}

const withoutType = 'send the body as application/json (content-type: application/json); it came without a content type';

/** The body's bytes, refusing more than `maxBytes` (413) as they arrive. */
async function readBodyBytes(request: Request, maxBytes: number): Promise<Buffer> {
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) throw tooLarge(maxBytes);
  if (!request.body) return Buffer.alloc(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

function tooLarge(maxBytes: number) {
  return new HttpError('PAYLOAD_TOO_LARGE', `the body is larger than ${maxBytes} bytes`);
}

/** Read, parse and validate a JSON body. */
export async function readJsonBody<T>(request: Request, schema: z.ZodType<T>, maxBytes: number): Promise<T> {
  const text = await readBodyText(request, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpError('INVALID_ARGUMENT', 'the body is not valid JSON');
  }
  return parseWith(schema, value, 'body');
}

/** Validate `value`; a failure is a 400 naming the first problems. */
export function parseWith<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  // A field's problem names the field; a problem with the whole value is already named by `what`.
  const problems = parsed.error.issues.slice(0, 3)
    .map((issue) => (issue.path.length ? `${issue.path.join('.')}: ${issue.message}` : issue.message));
  throw new HttpError('INVALID_ARGUMENT', `invalid ${what}: ${problems.join('; ')}`);
}

/** A uuid path parameter (any 8-4-4-4-12 hex id, as Postgres accepts). */
export const idParam = z.guid();

/** Validate a uuid path parameter by name. */
export function readIdParam(params: Record<string, string | undefined>, name: string): string {
  return parseWith(idParam, params[name], `path parameter "${name}"`);
}

// Seqs stay below 2^53: JSON and JS numbers carry them exactly.
const cursor = z.string().regex(/^\d+$/, 'must be a non-negative integer')
  .regex(/^\d{1,15}$/, 'is larger than any seq (15 digits at most)').transform(Number);

/**
 * The replay cursor: the Last-Event-ID header (an EventSource reconnect) wins over `?after=`,
 * because a reconnect keeps the original URL. Default 0: the whole log.
 */
export function readCursor(request: Request, url: URL): number {
  const header = request.headers.get('last-event-id');
  if (header !== null && header.trim() !== '') return parseWith(cursor, header.trim(), 'Last-Event-ID');
  const after = url.searchParams.get('after');
  if (after !== null) return parseWith(cursor, after, 'query parameter "after"');
  return 0;
}

/** A bounded `?limit=` (default `fallback`). */
export function readLimit(url: URL, fallback: number, max: number): number {
  const raw = url.searchParams.get('limit');
  if (raw === null) return fallback;
  // Digits only: `0x10`, `1e2` and `1.0` are numbers to JavaScript, not a count a caller meant.
  return parseWith(z.string().regex(/^[0-9]{1,9}$/, `must be a whole number from 1 to ${max}`).transform(Number).pipe(z.number().int().min(1).max(max)),
    raw, 'query parameter "limit"');
}

export const streamFormats = ['sse', 'ai-sdk'] as const;
export type StreamFormat = (typeof streamFormats)[number];

/** `?format=sse` (default, agent-kit events) or `?format=ai-sdk` (the AI SDK UI message stream). */
export function readStreamFormat(url: URL): StreamFormat {
  const format = url.searchParams.get('format') ?? undefined;
  return parseWith(z.enum(streamFormats).default('sse'), format, 'query parameter "format"');
}

/** Text Postgres can store: it has no U+0000 (a 400 that says so, not the database's words). */
const storable = (schema: z.ZodString) => schema.refine((s) => !s.includes('\u0000'), 'must not contain U+0000 (NUL)');

/**
 * Strict: a misspelled key (`threadID`) is a 400, not a message to a new thread. With
 * `regenerate: true` the body asks an earlier message's turn again (ADR-0091): `clientMessageId`
 * names it (its client id, or its stored id) in `threadId`, and `message`, if sent, is its text;
 * `replaces`, the run whose reply the client saw, makes the request safe to send again (ADR-0092).
 */
export const chatBodySchema = z.object({
  threadId: z.guid().optional(),
  message: storable(z.string().max(maxMessageChars)).refine((s) => !isBlank(s), 'must not be blank').optional(),
  clientMessageId: storable(z.string().min(1).max(200)).optional(),
  regenerate: z.boolean().optional(),
  replaces: z.guid().optional(),
}).strict().superRefine((body, issues) => {
  const missing = (path: string, message: string) => issues.addIssue({ code: 'custom', path: [path], message });
  if (!body.regenerate) {
    if (body.message === undefined) missing('message', 'is required (or regenerate: true, to ask an earlier message\'s turn again)');
    if (body.replaces !== undefined) missing('replaces', 'goes with regenerate: true (the run whose reply is asked again)');
    return;
  }
  if (body.threadId === undefined) missing('threadId', 'is required to regenerate a reply');
  if (body.clientMessageId === undefined) missing('clientMessageId', 'is required to regenerate a reply: the message whose turn is asked again');
});
export type ChatBody = z.infer<typeof chatBodySchema>;

const questionId = storable(z.string().min(1).max(200));

/** An answer to a question (`answer`) or a tool approval (`approved`), never both. */
export const inputBodySchema = z.unknown().superRefine((body, ctx) => {
  // Else the union says only "Invalid input": neither of its shapes takes both fields.
  if (typeof body === 'object' && body !== null && 'answer' in body && 'approved' in body) {
    ctx.addIssue({ code: 'custom', message: 'send an answer or an approval, not both: { questionId, answer } to a question, { questionId, approved } to an approval' });
  }
}).pipe(z.union([
  z.object({ questionId, answer: storable(z.string().max(maxMessageChars)).refine((s) => !isBlank(s), 'must not be blank') }).strict(),
  z.object({ questionId, approved: z.boolean() }).strict(),
]));
export type InputBody = z.infer<typeof inputBodySchema>;

/** An operator's verdict on an effect in doubt: its key, whether it happened, an optional note. */
export const resolveEffectBodySchema = z.object({
  key: storable(z.string().min(1).max(500)),
  happened: z.boolean(),
  note: storable(z.string().max(2000)).optional(),
}).strict();

/** An operator's reply in a held run's place (ADR-0114): the text the person chatting reads. */
export const replyBodySchema = z.object({
  text: storable(z.string().max(maxMessageChars)).refine((s) => !isBlank(s), 'must not be blank'),
}).strict();

/**
 * A cancel's body, which may be left out: how far the viewer who stops the reply had seen it, the
 * seq of the last thread event the page showed (ADR-0090).
 */
export const cancelBodySchema = z.object({
  shownSeq: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
}).strict();

/**
 * The body of a route that takes none (takeover, release, restore): left out, or `{}` as JSON.
 * A form's body (or any other non-JSON one) is refused like everywhere else, so a page on another
 * origin cannot send one of these with a plain HTML form (ADR-0101).
 */
export const noBodySchema = z.object({}).strict();

/**
 * A JSON body that may be left out: none (no content type and no bytes) is `{}`. The bytes are
 * counted, not the headers: a server may hand over an empty stream for a body-less request.
 */
export async function readOptionalJsonBody<T>(request: Request, schema: z.ZodType<T>, maxBytes: number): Promise<T> {
  if (request.headers.get('content-type')) return readJsonBody(request, schema, maxBytes);
  if ((await readBodyBytes(request, maxBytes)).byteLength === 0) return parseWith(schema, {}, 'body');
  throw new HttpError('UNSUPPORTED_MEDIA_TYPE', withoutType);
}
