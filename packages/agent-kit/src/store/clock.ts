// Control of agent_kit_now(), the one lease clock. Tests and the simulator move time with these
// instead of sleeping; production never sets a fake time.
import type { Queryable } from './db.js';

/** Freeze agent_kit_now() at `at`. */
export async function setFakeNow(db: Queryable, at: Date): Promise<void> {
  await db.query(
    `insert into agent_kit_clock (id, fake_now) values (true, $1)
     on conflict (id) do update set fake_now = excluded.fake_now`,
    [at.toISOString()],
  );
}

/** Let agent_kit_now() follow the database's now() again. */
export async function clearFakeNow(db: Queryable): Promise<void> {
  await db.query('delete from agent_kit_clock');
}

/** Move the fake clock forward by `ms` (starting from the real now() when none is set). */
export async function advanceFakeNow(db: Queryable, ms: number): Promise<Date> {
  const rows = await db.query<{ at: Date }>(
    `insert into agent_kit_clock (id, fake_now) values (true, now() + make_interval(secs => $1))
     on conflict (id) do update set fake_now = agent_kit_clock.fake_now + make_interval(secs => $1)
     returning fake_now as at`,
    [ms / 1000],
  );
  return new Date(rows[0]!.at);
}

/** The lease clock's current time. */
export async function dbNow(db: Queryable): Promise<Date> {
  const rows = await db.query<{ at: Date }>('select agent_kit_now() as at');
  return new Date(rows[0]!.at);
}
