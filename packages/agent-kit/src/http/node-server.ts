// node:http glue for `handle`: turn an IncomingMessage into a Web Request and stream the Web
// Response back with backpressure. A client that goes away aborts the request's signal and
// cancels the response body, which closes a stream's follower; it never stops a turn.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';

export interface NodeListenerOptions {
  /**
   * Told of an error no route answered (the adapter's own, or a handler that threw past its
   * guard), which the client gets as a bare 500. Default: written to stderr, so it is never lost.
   */
  onError?: (error: unknown, request: { method: string | undefined; url: string | undefined }) => void;
}

/**
 * Adapt `handle(request)` to a node:http request listener (or an Express or Connect middleware's
 * place). A body a parser read first (`express.json()` before agent-kit's routes) is taken from
 * `req.body`: JSON is sent on as JSON, a string or Buffer as is.
 */
export function toNodeListener(
  handle: (request: Request) => Promise<Response>, options: NodeListenerOptions = {},
): (req: IncomingMessage, res: ServerResponse) => void {
  const onError = options.onError ?? ((error, request) => {
    console.error(`agent-kit: ${request.method} ${request.url} failed:`, error);
  });
  return (req, res) => {
    void serve(handle, req, res).catch((error: unknown) => {
      onError(error, { method: req.method, url: req.url });
      if (res.headersSent) return void res.end();
      res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
      res.end('{"error":{"code":"INTERNAL","message":"internal error"}}');
    });
  };
}

async function serve(
  handle: (request: Request) => Promise<Response>, req: IncomingMessage, res: ServerResponse,
) {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  const url = requestUrl(req);
  if (!url) {
    res.writeHead(400, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ error: { code: 'INVALID_ARGUMENT', message: 'the request\'s Host header or target is not a host and a path' } }));
    return;
  }
  // A request has a body only when it says so (RFC 9112 §6.3): `curl -X POST` sends neither header.
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD'
    && (req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0');
  const parsed = hasBody ? bodyReadBefore(req) : undefined;
  if (parsed !== undefined) {
    // Its length is no longer the header's (a parser's JSON is written again).
    headers.delete('content-length');
    headers.delete('transfer-encoding');
    headers.delete('content-encoding'); // (a parser inflated it)
  }
  const streamed = hasBody && parsed === undefined;
  const request = new Request(url, {
    method: req.method,
    headers,
    body: parsed ?? (streamed ? (Readable.toWeb(req) as ReadableStream<Uint8Array>) : undefined),
    signal: controller.signal,
    // Required by fetch for a streamed request body.
    ...(streamed ? { duplex: 'half' } : {}),
  } as RequestInit);
  const response = await handle(request);
  const outgoing: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name !== 'set-cookie') outgoing[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length) outgoing['set-cookie'] = cookies;
  res.writeHead(response.status, outgoing);
  if (!response.body) {
    res.end();
    return;
  }
  res.flushHeaders();
  const reader = response.body.getReader();
  controller.signal.addEventListener('abort', () => void reader.cancel().catch(() => {}), { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) await new Promise<void>((resolve) => {
        // Whichever fires first removes both, so a long stream to a slow reader adds no listeners.
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.once('drain', done);
        res.once('close', done);
      });
      if (controller.signal.aborted) break;
    }
  } catch {
    // The body failed or was cancelled because the client left; nothing more to send.
  } finally {
    res.end();
  }
}

/**
 * The body a middleware read before this listener (the stream is spent), from `req.body`: a string
 * or bytes as they are, anything else as JSON. Undefined when the stream is still unread.
 * @throws Error when the stream was read and nothing was left in `req.body` to send on.
 */
function bodyReadBefore(req: IncomingMessage): string | Uint8Array | undefined {
  if (!req.readableEnded && !req.readableDidRead) return undefined;
  const body = (req as IncomingMessage & { body?: unknown }).body;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  if (body !== undefined && body !== null) return JSON.stringify(body);
  throw new Error('the request body was read before agent-kit\'s handler and is not in req.body: '
    + 'mount agent-kit\'s routes before any body parser');
}

/** A host name, IPv4 or [IPv6] address, with an optional port: what a Host header may hold. */
const hostPattern = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$/;

/**
 * The request's URL: the target's path and query (of an absolute-form target too, whose own host
 * is ignored) on the Host header's host. Null when the Host header is not a host: it never
 * decides the path, as a header of `x/api/status?` would if it were pasted in.
 */
function requestUrl(req: IncomingMessage): string | null {
  const host = req.headers.host ?? 'localhost';
  if (!hostPattern.test(host)) return null;
  let target = req.url ?? '/';
  if (!target.startsWith('/')) {
    if (!URL.canParse(target)) return null;
    const absolute = new URL(target);
    target = `${absolute.pathname}${absolute.search}`;
  }
  const url = `http://${host}${target}`;
  return URL.canParse(url) ? url : null;
}
