// Guarded writes the lease module and the salvage share inside their transactions: not exported
// from the package (a caller goes through closeRun, appendEvent, salvageRun).
import type { Queryable } from '../store/db.js';
import { toNumber } from '../store/db.js';
import { byIndex, type GroupedWrite } from '../store/group-commit.js';
import type { Lease } from './lease.js';

export type CloseStatus = 'completed' | 'failed' | 'aborted';

/** Append an event under the lease's guard; null = the fence refused it. Wakes nobody. */
export async function appendEventRow(
  q: Queryable, lease: Lease, type: string, data: Record<string, unknown>,
): Promise<number | null> {
  const rows = await q.query<{ seq: number | null }>(
    'select agent_kit_append_event($1, $2, $3, $4, $5::jsonb) as seq',
    [lease.runId, lease.owner, lease.fence, type, JSON.stringify(data)],
  );
  const seq = rows[0]?.seq;
  return seq === null || seq === undefined ? null : toNumber(seq);
}

interface CloseArgs {
  runId: string;
  owner: string;
  fence: number;
  status: CloseStatus;
  message: { text: string } & Record<string, unknown>;
}

/** A close, alone or grouped with other runs' closes (migration 0017, ADR-0021). */
export const closeRunWrite: GroupedWrite<CloseArgs, string | null> = {
  name: 'close_run',
  async one(db, a) {
    const rows = await db.query<{ id: string | null }>(
      'select agent_kit_close_run($1, $2, $3::jsonb, $4, $5) as id',
      [a.runId, a.status, JSON.stringify(a.message), a.owner, a.fence],
    );
    return rows[0]?.id ?? null;
  },
  async many(db, all) {
    const rows = await db.query<{ i: number; message_id: string | null }>(
      'select * from agent_kit_close_runs($1::jsonb)', [JSON.stringify(all)],
    );
    return byIndex(rows, all.length).map((row) => row?.message_id ?? null);
  },
};

