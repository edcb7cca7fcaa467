// Tidiness rules that keep the codebase readable and the schema history honest: short files, a
// header comment on every source file, dependencies that point down the layer table, append-only
// migrations (hash list in sql/migrations.lock), no SQL function planned on every call, and no
// focused tests left behind. Method: read the files on disk; each failure lists every offender
// and says how to fix it.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const srcDir = path.join(packageDir, 'src');
const migrationsDir = path.join(packageDir, 'sql', 'migrations');
const lockPath = path.join(packageDir, 'sql', 'migrations.lock');

const maxFileLines = 400; // STYLE.md §1: a file is read in one sitting

/**
 * Layers, lowest first. A module may import its own layer or lower ones, never a higher one.
 * Keys are folders under src/ or top-level files. `model` is a leaf the ledger and turn use;
 * `worker` is the long-running loop over drain and reap, beside them. `client` (the browser's side
 * of the routes) imports none of ours.
 */
const layerOf: Record<string, number> = {
  'errors.ts': 1, 'errors.test.ts': 1, 'approval.ts': 1, 'blank.ts': 1, 'config.ts': 1, 'config.test.ts': 1, 'clock.ts': 1, store: 1,
  lease: 2, 'event-log': 2, 'effect-ledger': 2, model: 2,
  turn: 3, queue: 3, reaper: 3, worker: 3,
  http: 4, cli: 4, client: 4,
  'index.ts': 5,
};
const layerNames = ['not in the layer table', 'store/errors/config/clock', 'lease/event-log/effect-ledger/model',
  'turn/queue/reaper/worker', 'adapters (http, cli, client)', 'the public index'];

function listFiles(dir: string, suffix: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const found: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules') found.push(...listFiles(full, suffix));
    } else if (entry.name.endsWith(suffix)) {
      found.push(full);
    }
  }
  return found.sort();
}

const rel = (file: string) => path.relative(packageDir, file);
const isTestFile = (file: string) => /\.test\.ts$/.test(file);

/** The module (first path segment under src/) a file belongs to. */
function moduleOf(file: string): string {
  return path.relative(srcDir, file).split(path.sep)[0]!;
}

/** Relative specifiers of static imports, re-exports and dynamic imports. */
function relativeImports(source: string): string[] {
  const pattern =
    /\bfrom\s+['"](\.{1,2}\/[^'"]+)['"]|\bimport\s*\(\s*['"](\.{1,2}\/[^'"]+)['"]|\bimport\s+['"](\.{1,2}\/[^'"]+)['"]/g;
  return [...source.matchAll(pattern)].map((m) => (m[1] ?? m[2] ?? m[3])!);
}

function sha256Prefix(file: string): string {
  return crypto.createHash('sha256').update(fs.readFileSync(file, 'utf8')).digest('hex').slice(0, 16);
}

describe('tidy', () => {
  const sourceFiles = listFiles(srcDir, '.ts');

  it('finds the sources it checks', () => {
    expect(sourceFiles.length).toBeGreaterThan(10);
  });

  it('recognises static, type-only, re-export, side-effect and dynamic relative imports', () => {
    const source = [
      `import { a } from './a.js';`, `import type { B } from '../b/index.js';`,
      `export * from './c.js';`, `import './d.js';`, `await import('../e.js');`,
      `import pg from 'pg';`, `const s = "from nowhere";`,
    ].join('\n');
    expect(relativeImports(source)).toEqual(['./a.js', '../b/index.js', './c.js', './d.js', '../e.js']);
  });

  it(`keeps every file under src/ at ${maxFileLines} lines or fewer`, () => {
    const offenders = sourceFiles
      .map((file) => ({ file: rel(file), lines: fs.readFileSync(file, 'utf8').split('\n').length }))
      .filter(({ lines }) => lines > maxFileLines)
      .map(({ file, lines }) => `${file}: ${lines} lines`);
    expect(offenders, `split these files (limit ${maxFileLines} lines)`).toEqual([]);
  });

  it('opens every .ts file under src/ with a // comment saying what it owns', () => {
    const offenders = sourceFiles
      .filter((file) => !fs.readFileSync(file, 'utf8').startsWith('//'))
      .map(rel);
    expect(offenders, 'start these files with a `//` comment (STYLE.md §4)').toEqual([]);
  });

  it('places every module under src/ in the layer table', () => {
    const unknown = [...new Set(sourceFiles.map(moduleOf))].filter((m) => !(m in layerOf));
    expect(unknown, 'add these modules to layerOf in test/tidy.test.ts').toEqual([]);
  });

  it('never lets a lower layer import a higher one (tests may compose layers)', () => {
    const offenders: string[] = [];
    for (const file of sourceFiles.filter((f) => !isTestFile(f))) {
      const from = moduleOf(file);
      for (const spec of relativeImports(fs.readFileSync(file, 'utf8'))) {
        const target = path.resolve(path.dirname(file), spec);
        if (!target.startsWith(srcDir + path.sep)) continue;
        const to = moduleOf(target.replace(/\.js$/, '.ts'));
        const fromLayer = layerOf[from] ?? 0;
        const toLayer = layerOf[to] ?? 0;
        if (toLayer > fromLayer) {
          offenders.push(`${rel(file)} imports ${spec}: ${from} (${layerNames[fromLayer]}) ` +
            `must not depend on ${to} (${layerNames[toLayer]})`);
        }
      }
    }
    expect(offenders, 'dependencies point down: adapters → turn/queue/reaper/worker → lease/… → store').toEqual([]);
  });

  it('treats migrations as append-only: listed hashes match and new files are appended', () => {
    const listed = fs.readFileSync(lockPath, 'utf8').split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map((line) => {
        const [file, hash] = line.split(/\s+/);
        return { file: file!, hash: hash! };
      });
    const files = fs.readdirSync(migrationsDir).filter((f) => f.endsWith('.sql')).sort();
    const problems: string[] = [];
    listed.forEach(({ file, hash }, index) => {
      if (files[index] !== file) {
        problems.push(`line ${index + 1} of sql/migrations.lock lists ${file}, but migration ` +
          `${index + 1} on disk is ${files[index] ?? 'missing'}: never rename or delete a migration`);
      } else if (sha256Prefix(path.join(migrationsDir, file)) !== hash) {
        problems.push(`${file} changed after it was locked (${hash} → ` +
          `${sha256Prefix(path.join(migrationsDir, file))}): revert it and add a new migration instead`);
      }
    });
    for (const file of files.slice(listed.length)) {
      problems.push(`new migration ${file}: append "${file} ${sha256Prefix(path.join(migrationsDir, file))}" ` +
        'to sql/migrations.lock (and run `npm run db:dump`)');
    }
    expect(problems).toEqual([]);
  });

  it('writes no SQL-language function that reads a table, but the two listed (migration 0015)', () => {
    // Postgres cannot inline a SQL function whose body reads a table, and then plans its body again
    // at every call site of every statement that calls it: agent_kit_now() cost ~0.1 ms a call so.
    const allowed = new Map([
      ['agent_kit_schema_version()', 'read once when a store opens'],
      ['agent_kit_claim_run(p_run_id uuid, p_owner text, p_ttl interval)', 'the 3-argument form for psql users; the engine calls the 4-argument one'],
    ]);
    const schema = fs.readFileSync(path.join(packageDir, 'sql', 'schema.sql'), 'utf8');
    const offenders = schema.split(/^-- function /m).slice(1)
      .filter((block) => /^ LANGUAGE sql$/m.test(block) && /\bfrom\b/i.test(block.slice(block.indexOf('$function$'))))
      .map((block) => block.slice(0, block.indexOf('\n')))
      .filter((signature) => !allowed.has(signature));
    expect(offenders, 'write these in PL/pgSQL (its plans are cached per session)').toEqual([]);
  });

  it('declares how few rows the claims return, so no claim statement is JIT-compiled (migration 0018)', () => {
    // The engine wraps these in statements with a history subquery per row. At Postgres's default
    // estimate (1000 rows) such a statement's cost passed jit_above_cost and each claim paid ~15 ms
    // of JIT. CREATE OR REPLACE FUNCTION without ROWS resets the estimate to 1000.
    const engineClaims = [
      'agent_kit_claim_run(p_run_id uuid, p_owner text, p_ttl interval, p_budget interval)',
      'agent_kit_claim_due_runs(p_owners text[], p_ttl interval, p_budget interval, p_max_attempts integer)',
    ];
    const schema = fs.readFileSync(path.join(packageDir, 'sql', 'schema.sql'), 'utf8');
    const blocks = new Map(schema.split(/^-- function /m).slice(1)
      .map((block) => [block.slice(0, block.indexOf('\n')), block] as const));
    const estimates = engineClaims.map((signature) => {
      const block = blocks.get(signature);
      const header = block?.slice(0, block.indexOf('$function$')) ?? '';
      return { signature, rows: Number(/^ ROWS (\d+)$/m.exec(header)?.[1] ?? 1000) };
    });
    expect(estimates.filter((e) => !blocks.has(e.signature)), 'engine claim functions missing from sql/schema.sql').toEqual([]);
    expect(estimates.filter((e) => e.rows > 10), 'declare ROWS 1 (one run) or ROWS 10 (a batch)').toEqual([]);
  });

  it('leaves no focused test (.only) behind', () => {
    const testFiles = [
      ...listFiles(srcDir, '.test.ts'),
      ...listFiles(path.join(packageDir, 'test'), '.test.ts'),
    ];
    const focused = /\b(?:it|test|describe|suite|bench)(?:\.\w+)*\.only\s*\(/;
    const offenders = testFiles.flatMap((file) =>
      fs.readFileSync(file, 'utf8').split('\n')
        .map((line, index) => ({ line, index }))
        .filter(({ line }) => focused.test(line))
        .map(({ index }) => `${rel(file)}:${index + 1}`));
    expect(offenders, 'remove .only so CI runs every test').toEqual([]);
  });
});
