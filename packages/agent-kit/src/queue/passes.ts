// The drains and reapers say when they last looked at the store (agent_kit_passes, ADR-0055),
// so that `agent-kit status` can tell a quiet store from one nobody drains or reaps. A pass is
// recorded at most once per `passTiming.recordEveryMs` per runtime and kind: a worker looks every
// second, and its record need only be fresh to within the status's stale threshold (minutes).
import { coerceError } from '../errors.js';
import type { Runtime } from '../turn/types.js';

export type PassKind = 'drain' | 'reap';

/** How often one runtime writes its pass of a kind; tests shorten it (not part of the API). */
export const passTiming = { recordEveryMs: 10_000 };

const lastRecorded = new WeakMap<Runtime, Map<PassKind, number>>();

const recordSql = `insert into agent_kit_passes (kind, at, owner) values ($1, agent_kit_now(), $2)
  on conflict (kind) do update set at = excluded.at, owner = excluded.owner`;

/**
 * Record that `owner` ran a pass of `kind` now, unless this runtime did within the interval. A
 * failed write is logged, never thrown: the pass itself went on, and its next look writes again.
 */
export async function recordPass(rt: Runtime, kind: PassKind, owner: string): Promise<void> {
  const nowMs = Date.now();
  let byKind = lastRecorded.get(rt);
  if (!byKind) lastRecorded.set(rt, byKind = new Map());
  const last = byKind.get(kind);
  if (last !== undefined && nowMs - last < passTiming.recordEveryMs) return;
  byKind.set(kind, nowMs);
  try {
    await rt.db.query(recordSql, [kind, owner]);
  } catch (raw) {
    byKind.delete(kind);
    rt.log?.({ msg: `${kind}: recording the pass failed`, error: coerceError(raw).message });
  }
}
