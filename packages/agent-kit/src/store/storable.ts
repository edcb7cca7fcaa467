// What Postgres can store. Its text and jsonb refuse U+0000 (22021, 22P05) and jsonb an unpaired
// UTF-16 surrogate (22P02), and a model or a tool can produce either: a tool that reads a UTF-16
// file or a binary page, a model that echoes one. Refused, such a value failed every attempt of
// its turn, and a tool's side effect that had happened was left in doubt (ADR-0056). Whatever a
// model or a tool hands the engine goes through here first, so what is stored, streamed, replayed
// and given back to the model on a continuation is one and the same value. Each unstorable UTF-16
// unit becomes U+FFFD, one unit for one, so lengths and offsets do not move; a value becomes its
// JSON form (a Date its ISO string, a BigInt its digits), which is what the journal gives back.

/** A NUL, a high surrogate not followed by a low one, or a low surrogate not after a high one. */
// eslint-disable-next-line no-control-regex -- matching U+0000 is this pattern's purpose
const unstorable = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
/**
 * How JSON.stringify writes those: as escapes (a surrogate pair is written as itself), after an
 * even number of backslashes (`\\u0000` is a backslash and the text "u0000").
 */
const unstorableEscape = /(?<!\\)(?:\\\\)*\\u(?:0000|d[89a-f][0-9a-f]{2})/i;
const replacement = '\uFFFD';

/** `text` with each NUL and unpaired surrogate replaced by U+FFFD. */
export function storableText(text: string): string {
  return text.replace(unstorable, replacement);
}

/**
 * The most of a tool's result (its JSON text, in UTF-8 bytes) that is kept: 1 MiB, about 250,000
 * tokens, past any model's use of one result. A larger result is kept as its head (ADR-0058): it
 * is stored three times (ledger, journal, event log), replayed to every viewer and sent back to
 * the model, and past jsonb's limit (~255 MB) its record would fail with the effect done.
 */
export const defaultMaxToolResultBytes = 1024 * 1024;

/** Room the note of a cut result takes, besides its head. */
const noteBytes = 512;

/**
 * `value` in its JSON form, as it will be stored and as a continuation reads it back: what
 * `JSON.stringify` makes of it (a Date becomes its ISO string, NaN null; undefined and functions
 * go), a BigInt written as its digits, and every string, keys included, made storable. Throws
 * for a value that has no JSON form (a cycle).
 */
export function storableValue(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  return fromJson(jsonText(value));
}

/** JSON.stringify's text of `value`, BigInts as digits; `null` for none. Throws on a cycle. */
function jsonText(value: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    json = JSON.stringify(value, (_key, item: unknown) => (typeof item === 'bigint' ? item.toString() : item));
  }
  return json ?? 'null';
}

function fromJson(json: string): unknown {
  const parsed: unknown = JSON.parse(json);
  return unstorableEscape.test(json) ? cleanJson(parsed) : parsed;
}

/**
 * What a tool or a reconcile hook returned, as the effect's result: its storable JSON form, or,
 * when it has none, a note saying so. The effect happened either way, and is recorded so. A
 * result whose JSON text is over `maxBytes` (UTF-8) becomes `{ truncated, head }`: a note with
 * its size, and its first part (a string's own text, another value's JSON text) within the bound.
 */
export function storableResult(value: unknown, maxBytes = defaultMaxToolResultBytes): unknown {
  if (typeof value === 'string') {
    const text = storableText(value);
    // A UTF-16 unit is at most 6 bytes stored (an escape); only a long text is measured.
    if (text.length * 6 + 2 <= maxBytes) return text;
    const bytes = Buffer.byteLength(JSON.stringify(text));
    return bytes <= maxBytes ? text : cut(text, 'text', bytes, maxBytes);
  }
  let json: string;
  try {
    json = jsonText(value);
  } catch (raw) {
    const why = storableText(String(raw instanceof Error ? raw.message : raw).split('\n')[0]!);
    return { unstorable: `the tool ran, but what it returned has no JSON form to keep (${why})` };
  }
  // JSON text is escaped already: a unit is at most 3 bytes of UTF-8.
  const bytes = json.length * 3 <= maxBytes ? json.length : Buffer.byteLength(json);
  return bytes <= maxBytes ? fromJson(json) : cut(json, 'JSON text', bytes, maxBytes);
}

/** A result over its bound: a note of its size, and its head within the bound. */
function cut(text: string, what: string, bytes: number, maxBytes: number): { truncated: string; head: string } {
  const head = headWithin(text, Math.max(0, maxBytes - noteBytes));
  const truncated = `the tool's result was ${bytes} bytes, over the ${maxBytes} kept: this is the first ${head.length} characters of its ${what}, cut`;
  return { truncated, head };
}

/**
 * A thrown error's message as kept: storable, and over `maxBytes` its head with a note.
 */
export function storableMessage(message: string, maxBytes = defaultMaxToolResultBytes): string {
  const text = storableText(message);
  const bytes = Buffer.byteLength(text);
  if (bytes <= maxBytes) return text;
  return `${headWithin(text, Math.max(0, maxBytes - noteBytes))} … (cut: the message was ${bytes} bytes)`;
}

/**
 * The longest start of `text` whose JSON string (quoted, escaped) is within `budget` UTF-8
 * bytes, never ending between the two halves of a surrogate pair. A few passes: each shrinks the
 * cut by the ratio it was over.
 */
function headWithin(text: string, budget: number): string {
  let units = Math.min(text.length, budget);
  for (;;) {
    let head = text.slice(0, units);
    const last = head.charCodeAt(head.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) head = head.slice(0, -1);
    const size = Buffer.byteLength(JSON.stringify(head));
    if (size <= budget || head.length === 0) return head;
    units = Math.min(head.length - 1, Math.floor((head.length * budget) / size));
  }
}

function cleanJson(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) return value.map(cleanJson);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [storableText(key), cleanJson(item)]));
  }
  return value;
}

/**
 * A stream of text deltas made storable one at a time. A surrogate pair split between two deltas
 * is kept: a delta's last unit, when a high surrogate, waits for the next delta.
 */
export class StorableTextStream {
  private held = '';

  /** The storable text of `delta`, less a high surrogate it ends with (held for the next). */
  push(delta: string): string {
    let text = this.held + delta;
    this.held = '';
    const last = text.charCodeAt(text.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) {
      this.held = text.slice(-1);
      text = text.slice(0, -1);
    }
    return storableText(text);
  }

  /** The stream ended: a high surrogate still held had no pair. */
  end(): string {
    const held = this.held;
    this.held = '';
    return held ? replacement : '';
  }
}
