// A small static file server for the generated site (node:http, GET and HEAD only). It never
// serves a path outside the site folder; `/dir/` serves `/dir/index.html`.
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';

/** @type {Record<string, string>} */
const contentTypes = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * The file under `root` that `urlPath` names, or null when there is none or it escapes.
 * @param {string} root
 * @param {string} urlPath
 */
function findFile(root, urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null; // Malformed percent-encoding.
  }
  const candidate = normalize(join(root, decoded));
  if (candidate !== root && !candidate.startsWith(root + sep)) return null;
  if (!existsSync(candidate)) return null;
  if (statSync(candidate).isDirectory()) {
    const index = join(candidate, 'index.html');
    return existsSync(index) ? index : null;
  }
  return candidate;
}

/**
 * @param {string} root
 * @param {import('node:http').IncomingMessage} request
 * @param {import('node:http').ServerResponse} response
 */
function handleRequest(root, request, response) {
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.writeHead(405, { allow: 'GET, HEAD' }).end();
    return;
  }
  const urlPath = new URL(request.url ?? '/', 'http://localhost').pathname;
  const file = findFile(root, urlPath);
  if (file === null) {
    response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
    response.end(`Not found: ${urlPath}\n`);
    return;
  }
  const type = contentTypes[extname(file).toLowerCase()] ?? 'application/octet-stream';
  response.writeHead(200, { 'content-type': type, 'cache-control': 'no-cache' });
  if (request.method === 'HEAD') response.end();
  else createReadStream(file).pipe(response);
}

/**
 * Serves `root` on `host:port` (port 0 picks a free one). Resolves once listening with the
 * base URL and a `close()` that stops accepting and ends open connections.
 * @param {{ root: string, port?: number, host?: string }} options
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
export async function serveSite({ root, port = 0, host = '127.0.0.1' }) {
  const siteRoot = normalize(root);
  const server = createServer((request, response) => handleRequest(siteRoot, request, response));
  await /** @type {Promise<void>} */ (
    new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    })
  );
  const address = server.address();
  const url = `http://${host}:${typeof address === 'object' && address ? address.port : port}`;
  const close = () =>
    /** @type {Promise<void>} */ (
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })
    );
  return { url, close };
}
