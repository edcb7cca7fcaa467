// `tsx test/hostile/summarize.ts DIR`: merge the tallies the hostile suites wrote to
// HOSTILE_REPORT_DIR (one JSON file per suite and store) into the Markdown table of
// docs/guides/hostile-input.md: what was tried, how many times per store, the expected status,
// the statuses seen, and violations; then one total line per store.
import fs from 'node:fs';
import path from 'node:path';
import type { TallyRow } from './hostile-kit.js';

interface Report {
  suite: string;
  store: string;
  runs: number;
  rows: TallyRow[];
}

const dir = process.argv[2];
/** Default: one row per kind of input (routes listed); `--full`: one row per route and kind. */
const full = process.argv.includes('--full');
if (!dir || !fs.existsSync(dir)) {
  console.error('usage: tsx test/hostile/summarize.ts DIR (the HOSTILE_REPORT_DIR of a run)');
  process.exit(2);
}
const reports: Report[] = fs.readdirSync(dir).filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as Report);
const stores = [...new Set(reports.map((r) => r.store))].sort();

interface Merged {
  suite: string;
  route: string;
  what: string;
  expected: string;
  inputs: Record<string, number>;
  statuses: Set<string>;
  violations: number;
  routes: Set<string>;
  expectedSet: Set<string>;
}

const merged = new Map<string, Merged>();
for (const report of reports) {
  for (const row of report.rows) {
    const key = full ? `${row.suite}|${row.route}|${row.what}` : `${row.suite}|${row.what}`;
    let m = merged.get(key);
    if (!m) {
      m = { suite: row.suite, route: '', what: row.what, expected: '', inputs: {}, statuses: new Set(), violations: 0, routes: new Set(), expectedSet: new Set() };
      merged.set(key, m);
    }
    // HTTP labels are "METHOD /path": count paths (routes), not method × path.
    m.routes.add(row.suite === 'cli' || full ? row.route : row.route.slice(row.route.indexOf(' ') + 1));
    for (const status of row.expected.split('/')) m.expectedSet.add(status);
    m.inputs[report.store] = (m.inputs[report.store] ?? 0) + row.inputs;
    for (const status of Object.keys(row.statuses)) m.statuses.add(status);
    m.violations += row.violations;
  }
}

for (const m of merged.values()) {
  const routes = [...m.routes].sort();
  m.route = routes.length <= 3 ? routes.join(', ') : `${routes.length} ${m.suite === 'cli' ? 'commands' : 'routes'}`;
  m.expected = [...m.expectedSet].sort().join('/');
}
const suiteOrder = ['bodies', 'params', 'auth', 'state', 'cli'];
const rows = [...merged.values()].sort((a, b) =>
  suiteOrder.indexOf(a.suite) - suiteOrder.indexOf(b.suite) || a.route.localeCompare(b.route) || a.what.localeCompare(b.what));
const cell = (text: string) => text.replace(/\|/g, '\\|');
console.log(`| suite | route / command | what was tried | ${stores.map((s) => `inputs (${s})`).join(' | ')} | expected | seen | violations |`);
console.log(`|---|---|---|${stores.map(() => '---:').join('|')}|---|---|---:|`);
for (const m of rows) {
  const seen = [...m.statuses].sort().join('/');
  const expected = m.suite === 'cli' ? 'exit ≠ 0' : m.expected;
  const seenText = m.suite === 'cli' ? `exit ${seen}` : seen;
  console.log(`| ${m.suite} | ${cell(m.route)} | ${cell(m.what)} | ${stores.map((s) => m.inputs[s] ?? 0).join(' | ')} | ` +
    `${expected} | ${seenText} | ${m.violations} |`);
}
console.log('');
for (const store of stores) {
  const mine = reports.filter((r) => r.store === store);
  const inputs = mine.reduce((n, r) => n + r.rows.reduce((k, row) => k + row.inputs, 0), 0);
  const violations = mine.reduce((n, r) => n + r.rows.reduce((k, row) => k + row.violations, 0), 0);
  console.log(`${store}: ${inputs} inputs, ${violations} violations (runs per property: ${mine[0]?.runs})`);
}
