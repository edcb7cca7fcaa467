// The schema as readable, deterministic text: every agent_kit_ table (columns, constraints,
// indexes, triggers), sequence and function in the current schema, ordered by name. The same schema gives
// the same text on PGlite (Postgres 18) and on older servers (15+), so sql/schema.sql can be
// checked against either; what the versions print differently is normalised here.
import type { Queryable } from './db.js';

interface ColumnRow {
  table_name: string;
  column_name: string;
  type: string;
  not_null: boolean;
  default_expr: string | null;
  identity: string;
}

interface DefRow {
  table_name: string;
  name: string;
  def: string;
}

// Objects of this library only; `_` is a LIKE wildcard, hence the escape.
const namePattern = `'agent\\_kit\\_%'`;

const columnsSql = `
  select c.relname as table_name, a.attname as column_name,
    format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null,
    pg_get_expr(d.adbin, d.adrelid) as default_expr, a.attidentity::text as identity
  from pg_class c
  join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
  left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
  where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
    and c.relname like ${namePattern}
  order by c.relname, a.attnum`;

// contype 'n' (NOT NULL as a constraint) exists from Postgres 18 on; nullability is printed with
// the column instead, so both versions agree.
const constraintsSql = `
  select c.relname as table_name, k.conname as name, pg_get_constraintdef(k.oid, true) as def
  from pg_constraint k join pg_class c on c.oid = k.conrelid
  where c.relnamespace = current_schema()::regnamespace and c.relname like ${namePattern}
    and k.contype in ('c', 'f', 'p', 'u', 'x')
  order by c.relname, k.conname`;

const indexesSql = `
  select t.relname as table_name, i.relname as name, pg_get_indexdef(i.oid) as def
  from pg_index x
  join pg_class i on i.oid = x.indexrelid
  join pg_class t on t.oid = x.indrelid
  where t.relnamespace = current_schema()::regnamespace and t.relname like ${namePattern}
  order by t.relname, i.relname`;

// Triggers of our own, not the ones Postgres makes for foreign keys.
const triggersSql = `
  select t.relname as table_name, g.tgname as name, pg_get_triggerdef(g.oid) as def
  from pg_trigger g join pg_class t on t.oid = g.tgrelid
  where t.relnamespace = current_schema()::regnamespace and t.relname like ${namePattern}
    and not g.tgisinternal
  order by t.relname, g.tgname`;

const sequencesSql = `
  select '' as table_name, c.relname as name, coalesce(
    (select 'owned by ' || t.relname || '.' || a.attname from pg_depend d
     join pg_class t on t.oid = d.refobjid
     join pg_attribute a on a.attrelid = d.refobjid and a.attnum = d.refobjsubid
     where d.objid = c.oid and d.classid = 'pg_class'::regclass and d.deptype in ('a', 'i')
     limit 1), 'standalone') as def
  from pg_class c
  where c.relnamespace = current_schema()::regnamespace and c.relkind = 'S'
    and c.relname like ${namePattern}
  order by c.relname`;

const functionsSql = `
  select '' as table_name,
    p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' as name,
    pg_get_functiondef(p.oid) as def
  from pg_proc p
  where p.pronamespace = current_schema()::regnamespace and p.proname like ${namePattern}
    and p.prokind = 'f'
  order by p.proname, pg_get_function_identity_arguments(p.oid)`;

/**
 * Text of every agent_kit_ object in the connection's current schema. Identical for identical
 * schemas on Postgres 15 through 18 (PGlite), independent of the schema's name.
 */
export async function dumpSchema(db: Queryable): Promise<string> {
  const [schemaRow] = await db.query<{ name: string }>('select quote_ident(current_schema()) as name');
  const schema = schemaRow!.name;
  const columns = await db.query<ColumnRow>(columnsSql);
  const constraints = await db.query<DefRow>(constraintsSql);
  const indexes = await db.query<DefRow>(indexesSql);
  const triggers = await db.query<DefRow>(triggersSql);
  const sequences = await db.query<DefRow>(sequencesSql);
  const functions = await db.query<DefRow>(functionsSql);

  const sections: string[] = [];
  for (const table of [...new Set(columns.map((c) => c.table_name))]) {
    sections.push(renderTable(table, columns, constraints, [...indexes, ...triggers]));
  }
  for (const sequence of sequences) {
    sections.push(`-- sequence ${sequence.name} (${sequence.def})\n`);
  }
  for (const fn of functions) {
    sections.push(`-- function ${fn.name}\n${normaliseFunction(fn.def)}\n`);
  }
  return unqualify(sections.join('\n'), schema);
}

/** A table as `create table`, then the statements that create its indexes and triggers. */
function renderTable(table: string, columns: ColumnRow[], constraints: DefRow[], attached: DefRow[]) {
  const lines = columns.filter((c) => c.table_name === table).map((c) => {
    let line = `  ${c.column_name} ${c.type}`;
    if (c.identity === 'a') line += ' generated always as identity';
    if (c.identity === 'd') line += ' generated by default as identity';
    if (c.not_null) line += ' not null';
    if (c.default_expr !== null) line += ` default ${c.default_expr}`;
    return line;
  });
  for (const k of constraints.filter((k) => k.table_name === table)) {
    lines.push(`  constraint ${k.name} ${k.def}`);
  }
  const attachedLines = attached.filter((i) => i.table_name === table).map((i) => `${i.def};`);
  return [`-- table ${table}`, `create table ${table} (`, lines.join(',\n'), ');', ...attachedLines, ''].join('\n');
}

/** Function text without what versions print differently: trailing blanks, final newlines. */
function normaliseFunction(def: string): string {
  return def
    .replace(/\r\n/g, '\n')
    .split('\n')
    .map((line) => line.replace(/[ \t]+$/, ''))
    .join('\n')
    .replace(/\n+$/, '');
}

/** Drop the schema qualifier, so a dump of `public` equals a dump of any other schema. */
function unqualify(text: string, schema: string): string {
  const escaped = schema.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return text.replace(new RegExp(`(?<![\\w"])${escaped}\\.(?=[\\w"])`, 'g'), '');
}

/** First lines of sql/schema.sql: where it comes from, so nobody edits it by hand. */
export const schemaFileHeader =
  '-- generated by npm run db:dump; do not edit.\n' +
  '-- The schema after every migration in sql/migrations, as dumpSchema() prints it. Review its\n' +
  '-- diff with each new migration; test/scenarios/migrations.test.ts checks it is current.\n';

/** The whole text of sql/schema.sql for a dump. */
export function schemaFileText(dump: string): string {
  return `${schemaFileHeader}\n${dump}\n`;
}
