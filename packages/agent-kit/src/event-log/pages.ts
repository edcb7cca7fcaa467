// Keyset pages of a list ordered `created_at desc, id` (ADR-0044): a page starts after a row of
// the list, named by its id, and reads only its own rows at any depth. Runs and threads page so.
import { InvalidArgumentError } from '../errors.js';
import { uuidPattern } from '../store/db.js';

/** A page of a list and the `before` of the next (older) page, or null on the last page. */
export interface Page<T> {
  items: T[];
  next: string | null;
}

/** Where a list pages: its table, the alias its statement gives it, and what its rows are called. */
export interface PagedList {
  table: 'agent_kit_runs' | 'agent_kit_threads';
  alias: string;
  noun: 'run' | 'thread';
}

/**
 * The condition of a page that starts after `before` ('' for the first page), for a list of
 * `ownerId`'s rows (everyone's: null). The cursor must be a row of that list, by `ownerOf` (its
 * owner, or null for no such row): one the caller cannot see is refused like an unknown one. It
 * is added to `params`; its created_at bounds the index scan, its id breaks ties.
 * @throws InvalidArgumentError when `before` names no row of the list.
 */
export async function afterCursor(
  list: PagedList, { before, ownerId }: { before?: string; ownerId: string | null }, params: unknown[],
  ownerOf: (id: string) => Promise<string | null>,
): Promise<string> {
  if (before === undefined) return '';
  const owner = uuidPattern.test(before) ? await ownerOf(before) : null;
  if (owner === null || (ownerId !== null && owner !== ownerId)) {
    throw new InvalidArgumentError(`"before" names no ${list.noun} of this list: ${JSON.stringify(before.slice(0, 64))}`);
  }
  params.push(before);
  const n = params.length;
  const { alias, table } = list;
  const at = `(select c.created_at from ${table} c where c.id = $${n})`;
  return `and ${alias}.created_at <= ${at} and (${alias}.created_at < ${at} or ${alias}.id > $${n})`;
}

/** A page from `rows` read with one row more than `limit`: the extra row says a next page exists. */
export function toPage<T extends { id: string }>(rows: T[], limit: number): Page<T> {
  const items = rows.slice(0, limit);
  return { items, next: rows.length > limit ? items[items.length - 1]!.id : null };
}
