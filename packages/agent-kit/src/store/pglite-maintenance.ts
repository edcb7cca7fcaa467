// The embedded store's autovacuum (ADR-0050). PGlite runs Postgres as one backend without its
// background processes, so nothing ever vacuums, analyzes or freezes it: dead row versions of
// runs and jobs pile up, statistics never change, and transaction ids age toward wraparound.
// Here the store does what autovacuum would, by autovacuum's own rules and settings, once a
// minute (autovacuum_naptime).
import type { Queryable } from './db.js';

/** What one maintenance pass did: the tables it froze, vacuumed and analyzed. */
export interface MaintenanceReport {
  frozen: string[];
  vacuumed: string[];
  analyzed: string[];
  ms: number;
}

/** What a scheduled pass tells its observer: its report, or how it failed. */
export type MaintenanceOutcome = MaintenanceReport | { error: Error };

interface DueTable {
  name: string;
  freeze: boolean;
  vacuum: boolean;
  analyze: boolean;
}

// Autovacuum's rules (Postgres docs, "The Autovacuum Daemon") with its settings as they stand,
// reltuples standing in for a table's size as there (-1 until its first analyze), over every
// table the catalogs included: the database's oldest unfrozen transaction id is theirs too. A table
// created or altered `with (autovacuum_enabled = false)` is left alone as autovacuum leaves it,
// except to freeze it before its transaction ids wrap around.
const dueTablesSql = `
  select format('%I.%I', n.nspname, c.relname) as name,
    age(c.relfrozenxid) > coalesce($1::float8, current_setting('autovacuum_freeze_max_age')::float8) as freeze,
    a.enabled and coalesce(s.n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float8
        + current_setting('autovacuum_vacuum_scale_factor')::float8 * greatest(c.reltuples, 0)
      or s.n_ins_since_vacuum > current_setting('autovacuum_vacuum_insert_threshold')::float8
        + current_setting('autovacuum_vacuum_insert_scale_factor')::float8 * greatest(c.reltuples, 0), false)
      as vacuum,
    a.enabled and coalesce(s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8
        + current_setting('autovacuum_analyze_scale_factor')::float8 * greatest(c.reltuples, 0), false)
      as analyze
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  left join pg_stat_all_tables s on s.relid = c.oid
  cross join lateral (select coalesce((select o.option_value::bool from pg_options_to_table(c.reloptions) o
    where o.option_name = 'autovacuum_enabled'), true) as enabled) a
  where c.relkind in ('r', 'm') and c.relpersistence <> 't'
  order by n.nspname, c.relname`;

export interface MaintainOptions {
  /**
   * Freeze a table whose oldest unfrozen transaction id is older than this many transactions.
   * Default autovacuum_freeze_max_age (200 million): Postgres's limit before it forces a freeze.
   */
  freezeMaxAge?: number;
}

/**
 * One pass: freeze each table past autovacuum's freeze age, vacuum each one past its vacuum
 * thresholds, analyze each one past its analyze threshold. Each table is one statement, so other
 * queries to the store run between them. `exec` runs a statement outside any transaction.
 */
export async function maintainEmbeddedStore(
  db: Queryable & { exec(sql: string): Promise<void> }, options: MaintainOptions = {},
): Promise<MaintenanceReport> {
  const startAt = performance.now();
  // A backend sends its table statistics on at most once a second; have it send them now.
  await db.query('select pg_stat_force_next_flush()');
  const due = await db.query<DueTable>(dueTablesSql, [options.freezeMaxAge ?? null]);
  const report: MaintenanceReport = { frozen: [], vacuumed: [], analyzed: [], ms: 0 };
  for (const table of due) {
    if (table.freeze || table.vacuum) {
      const with_ = [table.freeze && 'freeze', table.analyze && 'analyze'].filter(Boolean).join(', ');
      await db.exec(`vacuum ${with_ ? `(${with_}) ` : ''}${table.name}`);
      (table.freeze ? report.frozen : report.vacuumed).push(table.name);
    } else if (table.analyze) {
      await db.exec(`analyze ${table.name}`);
    }
    if (table.analyze) report.analyzed.push(table.name);
  }
  report.ms = performance.now() - startAt;
  return report;
}

export interface MaintenanceSchedule {
  /** Stop the schedule and wait for a pass under way to end. */
  stop(): Promise<void>;
}

/**
 * Run `pass` every `everyMs` (each pass after the last one ended) until stopped. The timer does
 * not keep the process alive. A pass's result or error goes to `onPass`.
 */
export function scheduleMaintenance(
  pass: () => Promise<MaintenanceReport>,
  everyMs: number,
  onPass?: (outcome: MaintenanceOutcome) => void,
): MaintenanceSchedule {
  let stopped = false;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  const next = () => {
    timer = setTimeout(() => {
      running = pass().then(
        (report) => report,
        (raw: unknown) => ({ error: raw instanceof Error ? raw : new Error(String(raw)) }),
      ).then((outcome) => {
        try {
          onPass?.(outcome);
        } catch {
          // a failing observer must not stop the store's maintenance
        }
      }).finally(() => {
        running = undefined;
        if (!stopped) next();
      });
    }, everyMs);
    timer.unref();
  };
  next();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
