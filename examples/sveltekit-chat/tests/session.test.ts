// Unit tests of the signed session cookie: only a token signed with the secret, unexpired and
// naming an acceptable user, is a session; anything a client could craft without it is not.
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSessionToken, loadSessionSecret, normaliseUserName, readCookie, sessionMaxAgeSeconds, verifySessionToken,
} from '../src/lib/server/session';

const secret = Buffer.from('a-test-secret-that-is-long-enough-1234567890');
const otherSecret = Buffer.from('another-secret-that-is-long-enough-0987654321');
const folders: string[] = [];

afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe('session tokens', () => {
  it('verify to the user they were made for', () => {
    expect(verifySessionToken(secret, createSessionToken(secret, 'alice'))).toBe('alice');
  });

  it('are refused when signed with another secret', () => {
    expect(verifySessionToken(secret, createSessionToken(otherSecret, 'alice'))).toBeNull();
  });

  it('are refused when the payload is changed but the signature kept', () => {
    const token = createSessionToken(secret, 'alice');
    const forgedPayload = Buffer.from(JSON.stringify({ sub: 'operator', exp: 4_102_444_800 })).toString('base64url');
    expect(verifySessionToken(secret, `${forgedPayload}.${token.split('.')[1]}`)).toBeNull();
  });

  it('expire after the session lifetime', () => {
    const issuedAtMs = Date.parse('2030-01-01T00:00:00Z');
    const token = createSessionToken(secret, 'alice', issuedAtMs);
    expect(verifySessionToken(secret, token, issuedAtMs + (sessionMaxAgeSeconds - 1) * 1000)).toBe('alice');
    expect(verifySessionToken(secret, token, issuedAtMs + sessionMaxAgeSeconds * 1000)).toBeNull();
  });

  it('reject malformed values without throwing', () => {
    for (const value of [undefined, '', 'abc', 'a.b.c', '.sig', 'x'.repeat(2000), 'e30.AAAA']) {
      expect(verifySessionToken(secret, value)).toBeNull();
    }
  });
});

describe('user names', () => {
  it('are lower-cased and limited to a safe alphabet', () => {
    expect(normaliseUserName(' Alice ')).toBe('alice');
    expect(normaliseUserName('ops.team-1_x')).toBe('ops.team-1_x');
    for (const bad of ['', ' ', '-alice', 'a b', 'a'.repeat(41), '<script>', 42]) {
      expect(normaliseUserName(bad)).toBeNull();
    }
  });
});

describe('the session secret', () => {
  it('is generated once, kept with mode 0600 and reused on the next start', () => {
    const dir = mkdtempSync(join(tmpdir(), 'session-secret-'));
    folders.push(dir);
    const first = loadSessionSecret(dir, {});
    expect(first.length).toBeGreaterThanOrEqual(32);
    expect(statSync(join(dir, 'session-secret')).mode & 0o777).toBe(0o600);
    expect(loadSessionSecret(dir, {}).equals(first)).toBe(true);
    expect(readFileSync(join(dir, 'session-secret'), 'utf8')).toBe(first.toString('utf8'));
  });

  it('comes from AGENT_KIT_SESSION_SECRET when set, and a short one is refused', () => {
    const dir = mkdtempSync(join(tmpdir(), 'session-secret-'));
    folders.push(dir);
    const configured = 'x'.repeat(40);
    expect(loadSessionSecret(dir, { AGENT_KIT_SESSION_SECRET: configured }).toString()).toBe(configured);
    expect(() => loadSessionSecret(dir, { AGENT_KIT_SESSION_SECRET: 'short' })).toThrow(/at least 32/);
  });
});

describe('readCookie', () => {
  it('finds one cookie among several', () => {
    expect(readCookie('a=1; ak_session=tok.sig; b=2', 'ak_session')).toBe('tok.sig');
    expect(readCookie('a=1', 'ak_session')).toBeUndefined();
    expect(readCookie(null, 'ak_session')).toBeUndefined();
  });
});
