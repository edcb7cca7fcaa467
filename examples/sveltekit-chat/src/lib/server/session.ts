// Sessions: a signed cookie `ak_session` = base64url(JSON {sub, exp}) "." base64url(HMAC-SHA256).
// A request is someone only if the signature verifies (constant-time) and exp is in the future;
// nothing a client can set without the secret makes it a user or an operator. See ADR-0015.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const sessionCookieName = 'ak_session';
/** A week: long enough not to nag in a demo, short enough that a leaked cookie dies. */
export const sessionMaxAgeSeconds = 7 * 24 * 60 * 60;
/** 32 random bytes: the HMAC-SHA256 key length. Shorter configured secrets are refused. */
const secretBytes = 32;
const secretMinChars = 32;
const userNamePattern = /^[a-z0-9][a-z0-9_.-]{0,39}$/;

export interface SessionUser {
  /** The user name; it is the thread owner id agent-kit stores. */
  name: string;
  isOperator: boolean;
}

/** Lower-cases and checks a login name; returns null when it is not acceptable. */
export function normaliseUserName(raw: unknown): string | null {
  if (typeof raw !== 'string') return null;
  const name = raw.trim().toLowerCase();
  return userNamePattern.test(name) ? name : null;
}

/**
 * The signing secret: AGENT_KIT_SESSION_SECRET, else one generated on first start and kept in
 * `<dataDir>/session-secret` (mode 0600), so sessions survive restarts of one machine. Several
 * instances behind a load balancer must share AGENT_KIT_SESSION_SECRET instead.
 */
export function loadSessionSecret(dataDir: string, env: NodeJS.ProcessEnv = process.env): Buffer {
  const configured = env.AGENT_KIT_SESSION_SECRET;
  if (configured) {
    if (configured.length < secretMinChars) {
      throw new Error(`AGENT_KIT_SESSION_SECRET must be at least ${secretMinChars} characters long`);
    }
    return Buffer.from(configured, 'utf8');
  }
  const file = path.join(dataDir, 'session-secret');
  fs.mkdirSync(dataDir, { recursive: true });
  try {
    // wx: if two processes race on first start, the loser reads the winner's secret below.
    fs.writeFileSync(file, crypto.randomBytes(secretBytes).toString('base64url'), { flag: 'wx', mode: 0o600 });
  } catch (raw) {
    if ((raw as NodeJS.ErrnoException).code !== 'EEXIST') throw raw;
  }
  const stored = fs.readFileSync(file, 'utf8').trim();
  if (stored.length < secretMinChars) throw new Error(`${file} holds no usable secret; delete it to make a new one`);
  return Buffer.from(stored, 'utf8');
}

function sign(secret: Buffer, payload: string): string {
  return crypto.createHmac('sha256', secret).update(payload).digest('base64url');
}

/** A cookie value for `name`, valid for sessionMaxAgeSeconds from `nowMs`. */
export function createSessionToken(secret: Buffer, name: string, nowMs = Date.now()): string {
  const exp = Math.floor(nowMs / 1000) + sessionMaxAgeSeconds;
  const payload = Buffer.from(JSON.stringify({ sub: name, exp }), 'utf8').toString('base64url');
  return `${payload}.${sign(secret, payload)}`;
}

/** The user name in a valid, unexpired token; null for anything else. Never throws. */
export function verifySessionToken(secret: Buffer, token: string | undefined, nowMs = Date.now()): string | null {
  if (!token || token.length > 1024) return null;
  const dot = token.indexOf('.');
  if (dot <= 0 || dot !== token.lastIndexOf('.')) return null;
  const payload = token.slice(0, dot);
  const given = Buffer.from(token.slice(dot + 1), 'base64url');
  const expected = Buffer.from(sign(secret, payload), 'base64url');
  // timingSafeEqual needs equal lengths; a length mismatch reveals nothing about the secret.
  if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) return null;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { sub?: unknown; exp?: unknown };
    if (typeof claims.exp !== 'number' || claims.exp * 1000 <= nowMs) return null;
    return normaliseUserName(claims.sub);
  } catch {
    return null;
  }
}

/** The value of cookie `name` in a Cookie header, or undefined. */
export function readCookie(header: string | null, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}
