// Configuration from the environment: durations in seconds with the unit named when a value is
// not one, bounds that catch milliseconds given as seconds, and a cron secret that is trimmed,
// long enough, and never repeated into an error.
import { describe, expect, it } from 'vitest';
import { configFromEnv } from './config.js';
import { storeOptionsFrom } from './store/open.js';

const refused = (env: Record<string, string>) => {
  try {
    configFromEnv(env);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
};

describe('configFromEnv', () => {
  it('reads seconds as milliseconds, the lease capped at the budget', () => {
    expect(configFromEnv({ AGENT_KIT_INVOCATION_BUDGET: '60', AGENT_KIT_LEASE_TTL: '0.5' }))
      .toMatchObject({ invocationBudgetMs: 60_000, leaseTtlMs: 500 });
    expect(configFromEnv({ AGENT_KIT_INVOCATION_BUDGET: '10', AGENT_KIT_LEASE_TTL: '30' }).leaseTtlMs).toBe(10_000);
  });

  it('names the unit when a duration is not a number of seconds', () => {
    expect(refused({ AGENT_KIT_INVOCATION_BUDGET: '60s' }))
      .toBe('AGENT_KIT_INVOCATION_BUDGET: expected a number of seconds, such as 60 (got "60s")');
    expect(refused({ AGENT_KIT_LEASE_TTL: '5m' })).toMatch(/^AGENT_KIT_LEASE_TTL: expected a number of seconds/);
  });

  it('refuses a budget in milliseconds and budgets or leases too short to work', () => {
    expect(refused({ AGENT_KIT_INVOCATION_BUDGET: '60000' })).toMatch(/at most 3 600 s .*milliseconds\?/);
    expect(refused({ AGENT_KIT_INVOCATION_BUDGET: '0.9' })).toMatch(/AGENT_KIT_INVOCATION_BUDGET: must be at least 1 s/);
    expect(refused({ AGENT_KIT_LEASE_TTL: '0.001' })).toMatch(/AGENT_KIT_LEASE_TTL: must be at least 0.1 s/);
    expect(refused({ AGENT_KIT_INVOCATION_BUDGET: '-5' })).toMatch(/at least 1 s/);
  });

  it('reads the model retries, 0 to 20, and leaves them unset by default', () => {
    expect(configFromEnv({ AGENT_KIT_MODEL_RETRIES: '0' }).modelRetries).toBe(0);
    expect(configFromEnv({ AGENT_KIT_MODEL_RETRIES: '8' }).modelRetries).toBe(8);
    expect(configFromEnv({})).not.toHaveProperty('modelRetries');
    expect(refused({ AGENT_KIT_MODEL_RETRIES: '21' })).toMatch(/^AGENT_KIT_MODEL_RETRIES: .*20.* \(got "21"\)$/);
    expect(refused({ AGENT_KIT_MODEL_RETRIES: '1.5' })).toMatch(/^AGENT_KIT_MODEL_RETRIES: .* \(got "1.5"\)$/);
  });

  it('reads the stop grace in seconds (ADR-0117), 0 to cut at once, and leaves it unset by default', () => {
    expect(configFromEnv({ AGENT_KIT_STOP_GRACE: '20' }).stopGraceMs).toBe(20_000);
    expect(configFromEnv({ AGENT_KIT_STOP_GRACE: '0' }).stopGraceMs).toBe(0);
    expect(configFromEnv({})).not.toHaveProperty('stopGraceMs');
    expect(refused({ AGENT_KIT_STOP_GRACE: '-1' })).toMatch(/^AGENT_KIT_STOP_GRACE: must be at least 0 s/);
    expect(refused({ AGENT_KIT_STOP_GRACE: '30000' })).toMatch(/at most 3 600 s .*milliseconds\?/);
  });

  it('refuses a number that is blank, hexadecimal or not finite, naming the variable', () => {
    // A blank value was read as 0: AGENT_KIT_MODEL_RETRIES=" " meant "fail at once".
    expect(refused({ AGENT_KIT_MODEL_RETRIES: ' ' })).toBe('AGENT_KIT_MODEL_RETRIES: expected a whole number (got " ")');
    expect(refused({ AGENT_KIT_INVOCATION_BUDGET: '\t' })).toMatch(/^AGENT_KIT_INVOCATION_BUDGET: expected a number of seconds/);
    expect(refused({ AGENT_KIT_POOL_MAX: '0x10' })).toBe('AGENT_KIT_POOL_MAX: expected a whole number (got "0x10")');
    expect(refused({ AGENT_KIT_MAX_RUN_ATTEMPTS: 'Infinity' })).toMatch(/^AGENT_KIT_MAX_RUN_ATTEMPTS: expected a whole number/);
    expect(refused({ AGENT_KIT_MAX_TOOL_RESULT_BYTES: '65536.5' })).toMatch(/whole number of bytes/);
    // Spaces around a number, and decimal exponents, are still numbers.
    expect(configFromEnv({ AGENT_KIT_POOL_MAX: ' 4 ', AGENT_KIT_MAX_TOOL_RESULT_BYTES: '1e6', AGENT_KIT_LEASE_TTL: '.5' }))
      .toMatchObject({ poolMax: 4, maxToolResultBytes: 1_000_000, leaseTtlMs: 500 });
  });

  it('reads the pool size, 1 to 100 connections, and leaves it unset by default', () => {
    expect(configFromEnv({ AGENT_KIT_POOL_MAX: '3' }).poolMax).toBe(3);
    expect(configFromEnv({})).not.toHaveProperty('poolMax');
    expect(refused({ AGENT_KIT_POOL_MAX: '0' })).toMatch(/^AGENT_KIT_POOL_MAX: .* \(got "0"\)$/);
    expect(refused({ AGENT_KIT_POOL_MAX: '101' })).toMatch(/^AGENT_KIT_POOL_MAX: .*100.* \(got "101"\)$/);
  });

  it('reads the bound on a tool result in bytes, 4 KiB to 100 MB, and leaves it unset by default', () => {
    expect(configFromEnv({ AGENT_KIT_MAX_TOOL_RESULT_BYTES: '65536' }).maxToolResultBytes).toBe(65_536);
    expect(configFromEnv({})).not.toHaveProperty('maxToolResultBytes');
    expect(refused({ AGENT_KIT_MAX_TOOL_RESULT_BYTES: '1024' })).toBe('AGENT_KIT_MAX_TOOL_RESULT_BYTES: must be at least 4096 bytes (got "1024")');
    expect(refused({ AGENT_KIT_MAX_TOOL_RESULT_BYTES: '300000000' })).toMatch(/at most 100000000 bytes/);
    expect(refused({ AGENT_KIT_MAX_TOOL_RESULT_BYTES: '1MB' })).toMatch(/expected a number of bytes/);
  });

  it('wants DATABASE_URL to be a Postgres connection string, and never prints it', () => {
    expect(configFromEnv({ DATABASE_URL: 'postgresql://u:pw@db.example:5432/app?sslmode=require' }).databaseUrl)
      .toBe('postgresql://u:pw@db.example:5432/app?sslmode=require');
    for (const url of ['notaurl', 'mysql://x:secret@127.0.0.1/db', 'postgres://']) {
      const refusal = refused({ DATABASE_URL: url });
      expect(refusal, url).toMatch(/^DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ connection string \(got \d+ characters\)$/);
      expect(refusal, url).not.toMatch(/notaurl|secret/); // (a URL may hold a password: only its length)
    }
  });

  it('reads AGENT_KIT_LISTEN_URL as a Postgres connection string, never printed, and leaves it unset by default', () => {
    expect(configFromEnv({ AGENT_KIT_LISTEN_URL: 'postgres://u:pw@db.example:5432/app' }).listenUrl)
      .toBe('postgres://u:pw@db.example:5432/app');
    expect(configFromEnv({ DATABASE_URL: 'postgres://u:pw@pooler.example:6543/app' })).not.toHaveProperty('listenUrl');
    const refusal = refused({ AGENT_KIT_LISTEN_URL: 'db.example:secret' });
    expect(refusal).toMatch(/^AGENT_KIT_LISTEN_URL: must be a postgres:\/\/ or postgresql:\/\/ connection string \(got 17 characters\)$/);
  });

  it('gives openDb every store setting of the environment through storeOptionsFrom', () => {
    const config = configFromEnv({
      DATABASE_URL: 'postgres://u:pw@pooler.example:6543/app', AGENT_KIT_LISTEN_URL: 'postgres://u:pw@db.example:5432/app',
      AGENT_KIT_POOL_MAX: '2', AGENT_KIT_DATA_DIR: 'data',
    });
    expect(storeOptionsFrom(config)).toEqual({
      databaseUrl: 'postgres://u:pw@pooler.example:6543/app', listenUrl: 'postgres://u:pw@db.example:5432/app', poolMax: 2, dataDir: 'data',
    });
  });

  it('trims the cron secret, wants 16 characters, and never prints it', () => {
    const secret = 'abcdefghijklmnopqrstuvwxyz012345';
    expect(configFromEnv({ CRON_SECRET: `${secret}\n` }).cronSecret).toBe(secret);
    const short = refused({ CRON_SECRET: 'hunter2' });
    expect(short).toMatch(/^CRON_SECRET: must be at least 16 characters .* \(got 7 characters\)$/);
    // Compared trimmed, so counted trimmed: 15 characters between the spaces, not 21.
    expect(refused({ CRON_SECRET: '   abcdefghijklmno   ' })).toMatch(/\(got 15 characters\)$/);
    expect(short).not.toContain('hunter2');
    expect(refused({ CRON_SECRET: '   \n' })).toMatch(/^CRON_SECRET: must be at least 16 characters/);
  });
});
