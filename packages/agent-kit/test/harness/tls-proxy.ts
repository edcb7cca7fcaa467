// A TLS front for the test Postgres server, as a hosted Postgres (Supabase, Neon, RDS) is reached:
// the client asks for TLS with Postgres's SSLRequest, the proxy answers 'S', completes the
// handshake with a certificate from a private CA made for the test (by the `openssl` command), and
// relays the decrypted protocol to the plain server. It counts what it carried, so a test can
// tell that a connection was encrypted, and can refuse TLS ('N') like a server with `ssl = off`.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Files of a private CA and of server certificates it signed, in a temporary folder. */
export interface TestCertificates {
  dir: string;
  /** The CA's certificate: what `sslrootcert=` names. */
  caFile: string;
  ca: string;
  /** A server certificate for `localhost` and 127.0.0.1. */
  server: { cert: string; key: string };
  /** A server certificate for another name only (`db.elsewhere.test`). */
  otherName: { cert: string; key: string };
  remove(): void;
}

/** Make a CA and two server certificates with `openssl` (EC keys: milliseconds each). */
export async function makeTestCertificates(): Promise<TestCertificates> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-kit-tls-'));
  const file = (name: string) => path.join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await run('openssl', ['req', '-x509', ...ec, '-keyout', file('ca.key'), '-out', file('ca.pem'), '-days', '2',
    '-subj', '/CN=agent-kit test CA']);
  async function serverCert(name: string, altNames: string) {
    await run('openssl', ['req', ...ec, '-keyout', file(`${name}.key`), '-out', file(`${name}.csr`), '-subj', `/CN=${name}`]);
    fs.writeFileSync(file(`${name}.ext`), `subjectAltName=${altNames}\n`);
    await run('openssl', ['x509', '-req', '-in', file(`${name}.csr`), '-CA', file('ca.pem'), '-CAkey', file('ca.key'),
      '-CAcreateserial', '-out', file(`${name}.pem`), '-days', '2', '-extfile', file(`${name}.ext`)]);
    return { cert: fs.readFileSync(file(`${name}.pem`), 'utf8'), key: fs.readFileSync(file(`${name}.key`), 'utf8') };
  }
  const server = await serverCert('localhost', 'DNS:localhost,IP:127.0.0.1');
  const otherName = await serverCert('db.elsewhere.test', 'DNS:db.elsewhere.test');
  return {
    dir, caFile: file('ca.pem'), ca: fs.readFileSync(file('ca.pem'), 'utf8'), server, otherName,
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

export interface TlsProxy {
  port: number;
  /** Connections that completed a TLS handshake and were relayed. */
  readonly encrypted: number;
  /** Connections relayed without TLS (the client never asked for it). */
  readonly plain: number;
  close(): Promise<void>;
}

const sslRequestCode = 80877103;

/**
 * Listen on 127.0.0.1 (a free port) and relay to `target`. With `certificate`, a client's
 * SSLRequest is answered 'S' and the connection is encrypted with it; without, it is answered 'N'
 * (the server does not support TLS) and the client may go on in plain text.
 */
export async function startTlsProxy(target: { host: string; port: number },
  certificate?: { cert: string; key: string }): Promise<TlsProxy> {
  let encrypted = 0;
  let plain = 0;
  const sockets = new Set<net.Socket>();
  const relay = (client: net.Socket | tls.TLSSocket, first: Buffer | undefined, onRelayed: () => void) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.once('connect', onRelayed);
    if (first) upstream.write(first);
    client.pipe(upstream).pipe(client);
    const end = () => { client.destroy(); upstream.destroy(); };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  };
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.once('readable', function onFirst() {
      const head = socket.read(8) as Buffer | null;
      if (!head) return void socket.once('readable', onFirst);
      const isSslRequest = head.readInt32BE(0) === 8 && head.readInt32BE(4) === sslRequestCode;
      if (!isSslRequest) return relay(socket, head, () => plain++);
      if (!certificate) {
        socket.write('N');
        return relay(socket, undefined, () => plain++);
      }
      socket.write('S');
      const secure = new tls.TLSSocket(socket, { isServer: true, cert: certificate.cert, key: certificate.key });
      secure.on('error', () => socket.destroy());
      secure.once('secure', () => relay(secure, undefined, () => encrypted++));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    get encrypted() { return encrypted; },
    get plain() { return plain; },
    close: () => new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
}
