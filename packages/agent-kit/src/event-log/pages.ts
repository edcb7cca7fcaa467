// Keyset pages of a list ordered `created_at desc, id` (ADR-0044): a page starts after a row of
// the list, named by its id, and reads only its own rows at any depth. Runs and threads page so.
import { InvalidArgumentError } from '../errors.js';
import { uuidPattern } from '../store/db.js';

/** A page of a list and the `before` of the next (older) page, or null on the last page. */
export interface Page<T> {
  items: T[];
  next: string | null;
}

/**
 * The rows after the cursor row `$n` of `table` (aliased `alias` in the list's statement) in the
 * order `created_at desc, id`. The cursor's created_at bounds the index scan; the id breaks ties.
 */
export function afterCursor(alias: string, table: string, n: number): string {
  const at = `(select c.created_at from ${table} c where c.id = $${n})`;
  return `and ${alias}.created_at <= ${at} and (${alias}.created_at < ${at} or ${alias}.id > $${n})`;
}

/** A page from `rows` read with one row more than `limit`: the extra row says a next page exists. */
export function toPage<T extends { id: string }>(rows: T[], limit: number): Page<T> {
  const items = rows.slice(0, limit);
  return { items, next: rows.length > limit ? items[items.length - 1]!.id : null };
}

/**
 * Refuse a cursor that is not a row the same list could show (`visible` answers for a
 * well-formed id): unknown, malformed and another owner's alike, so a cursor tells nobody
 * about rows they cannot see.
 */
export async function requireCursor(
  cursor: string, noun: 'run' | 'thread', visible: (id: string) => Promise<boolean>,
): Promise<void> {
  if (!uuidPattern.test(cursor) || !(await visible(cursor))) {
    throw new InvalidArgumentError(`"before" names no ${noun} of this list: ${JSON.stringify(cursor.slice(0, 64))}`);
  }
}
