// Adds up the vitest JSON reports that CI's test runs wrote into one folder and prints one closing
// line, "N passed, N failed, N skipped"; exits non-zero when a run failed or none ran at all.
// Each report's slowest files are listed too, which is where to look when CI grows slow.
import fs from 'node:fs';
import path from 'node:path';

const dir = process.argv[2];
if (!dir || !fs.existsSync(dir)) {
  console.error(`usage: test-summary.js REPORT_DIR (got ${dir})`);
  process.exit(2);
}
let passed = 0;
let failed = 0;
let skipped = 0;
for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
  const report = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  passed += report.numPassedTests ?? 0;
  failed += report.numFailedTests ?? 0;
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  console.log(`${file}: ${report.numPassedTests} passed, ${report.numFailedTests} failed`);
  const slowest = (report.testResults ?? [])
    .map((result) => ({ name: path.relative(process.cwd(), result.name), s: (result.endTime - result.startTime) / 1000 }))
    .filter((result) => Number.isFinite(result.s))
    .sort((a, b) => b.s - a.s)
    .slice(0, 8);
  for (const result of slowest) console.log(`  ${result.s.toFixed(1).padStart(6)} s  ${result.name}`);
}
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
