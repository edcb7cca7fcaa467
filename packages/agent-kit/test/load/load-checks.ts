// What a load viewer must have seen: its thread's log up to its run's run-closed, each event
// exactly once, in seq order, with no gap, byte for byte as the SSE `data:` carries it.
import crypto from 'node:crypto';
import { maxEventPageSize, readEvents, toEventJson } from '../../src/event-log/read-events.js';
import { withoutLeaseOwner } from '../../src/http/sse.js';
import type { Db } from '../../src/store/db.js';
import type { ViewerResult } from './viewer-process.js';

export interface LogDigest {
  count: number;
  lastSeq: number;
  hash: string;
}

/**
 * Hash the log as a viewer does (`seq|type|data`), from seq 1 to the run's run-closed, as a
 * viewer who is not an operator gets it (no lease owner, ADR-0107).
 */
export async function logDigest(db: Db, threadId: string, runId: string): Promise<LogDigest> {
  const hash = crypto.createHash('sha256');
  let count = 0;
  let lastSeq = 0;
  for (;;) {
    const page = await readEvents(db, { threadId, afterSeq: lastSeq, limit: maxEventPageSize });
    for (const event of page) {
      hash.update(`${event.seq}|${event.type}|${JSON.stringify(toEventJson(withoutLeaseOwner(event)))}\n`);
      count++;
      lastSeq = event.seq;
      if (event.type === 'run-closed' && event.runId === runId) {
        return { count, lastSeq, hash: hash.digest('hex') };
      }
    }
    if (page.length < maxEventPageSize) {
      return { count, lastSeq, hash: `${hash.digest('hex')} (no run-closed)` };
    }
  }
}

const maxListed = 20; // failures listed in full; the rest are counted

/** Every way a viewer's stream differs from its thread's log, as sentences. */
export function checkViewers(
  results: ViewerResult[], digests: Map<string, LogDigest>, expected: number,
): string[] {
  const failures: string[] = [];
  if (results.length !== expected) failures.push(`${results.length} viewers reported, ${expected} expected`);
  results.forEach((r, i) => {
    const d = digests.get(r.threadId);
    const wrong: string[] = [];
    if (!d) wrong.push('unknown thread');
    if (r.outcome !== 'closed') wrong.push(`ended ${r.outcome}`);
    if (r.problems.length) wrong.push(r.problems.join('; '));
    if (d && r.count !== d.count) wrong.push(`${r.count} events, the log has ${d.count}`);
    if (d && r.lastSeq !== d.lastSeq) wrong.push(`last seq ${r.lastSeq}, the log's ${d.lastSeq}`);
    if (d && r.count === d.count && r.hash !== d.hash) wrong.push('events differ from the log');
    if (wrong.length) failures.push(`viewer ${i} of thread ${r.threadId}: ${wrong.join(', ')}`);
  });
  if (failures.length > maxListed) {
    return [...failures.slice(0, maxListed), `… and ${failures.length - maxListed} more`];
  }
  return failures;
}
