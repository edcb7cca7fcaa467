// toNodeListener under backpressure: each write that waits for 'drain' must remove both of its
// listeners when either fires, or a long stream to a slow reader gains one 'close' listener per
// wait (the load run saw ~1 per 100 events per viewer before the fix). Method: a 10 MB body in
// 256 KiB chunks (every write is over the socket's high-water mark, so every write waits), read
// over loopback by fetch; count the response's 'close' listeners mid-stream.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, it } from 'vitest';
import { toNodeListener } from '../../src/http/node-server.js';

const chunks = 40;
const chunk = new Uint8Array(256 * 1024);

async function closeListenersMidStream(): Promise<number> {
  let sent = 0;
  const handle = async () => new Response(new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent++ < chunks) controller.enqueue(chunk);
      else controller.close();
    },
  }));
  const responses: http.ServerResponse[] = [];
  const listener = toNodeListener(handle);
  const server = http.createServer((req, res) => {
    responses.push(res);
    listener(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/`);
    const reader = response.body!.getReader();
    let received = 0;
    let midStream = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      received += value.byteLength;
      if (received >= (chunks * chunk.byteLength) / 2 && midStream === 0) {
        midStream = responses[0]!.listenerCount('close');
      }
    }
    expect(received).toBe(chunks * chunk.byteLength);
    return midStream;
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

it("a response's 'close' listeners do not pile up with backpressure waits", async () => {
  // One of toNodeListener's own (abort on close) is expected; twenty waits must not leave twenty.
  expect(await closeListenersMidStream()).toBeLessThanOrEqual(3);
});
