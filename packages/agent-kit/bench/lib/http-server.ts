// The library's HTTP handlers on a loopback node:http server, for the sections that measure what
// a browser sees (replay, the first token of a chat turn).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LanguageModel } from 'ai';
import { createHandlers, toNodeListener } from '../../src/http/index.js';
import type { Db } from '../../src/store/db.js';
import { benchRuntime } from '../orchestration.js';

/** Serve the handlers as `userId` on a loopback port for the duration of `body`. */
export async function withServer<T>(
  db: Db, userId: string, body: (baseUrl: string) => Promise<T>, model?: LanguageModel,
): Promise<T> {
  const handlers = createHandlers({
    rt: benchRuntime(db, model),
    authenticate: async () => ({ userId, isOperator: false }),
  });
  const server = http.createServer(toNodeListener(handlers.handle));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    return await body(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await handlers.segments.stop();
  }
}
