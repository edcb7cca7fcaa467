// What the local provider stubs share: an HTTP server on 127.0.0.1 that hands each request's
// parsed JSON body to the stub, and closes with its connections.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

async function readBody(request: IncomingMessage): Promise<string> {
  let text = '';
  for await (const piece of request) text += String(piece);
  return text;
}

/** A stub server: `baseURL` is `http://127.0.0.1:PORT/v1`, as providers take it. */
export async function serveStub<Body>(
  answer: (request: IncomingMessage, body: Body, response: ServerResponse) => void,
): Promise<{ baseURL: string; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    void (async () => answer(request, JSON.parse(await readBody(request)) as Body, response))();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
