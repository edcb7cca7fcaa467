// Print saved results (bench/results/*.json) as the Markdown that docs/benchmarks.md carries:
// the machine, the command, one table per store. `npx tsx bench/to-markdown.ts <file>…`
import fs from 'node:fs';
import { formatTable, type Report } from './lib/report.js';

function describeMachine(report: Report): string {
  const m = report.machine as Record<string, unknown>;
  const load = Array.isArray(m.loadAverageAtStart) ? (m.loadAverageAtStart as number[]).map((n) => n.toFixed(1)).join(', ') : '?';
  const server = report.store === 'postgres' ? `${String(m.postgres ?? '').split(' on ')[0]} (default config, loopback)` : String(m.postgres ?? '').split(' on ')[0];
  return `${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; ${server}; ` +
    `load average at start ${load}`;
}

for (const file of process.argv.slice(2)) {
  const report = JSON.parse(fs.readFileSync(file, 'utf8')) as Report;
  const title = report.store === 'postgres' ? 'Postgres' : '7. Embedded store (PGlite, in-process)';
  process.stdout.write(`### ${title}\n\n`);
  process.stdout.write(`\`${report.command}\` on ${report.startedAt.slice(0, 16).replace('T', ' ')} UTC — ${describeMachine(report)}.\n\n`);
  if (report.sectionSeconds) {
    const parts = Object.entries(report.sectionSeconds).map(([name, s]) => `${name} ${s.toFixed(0)} s`);
    const total = Object.values(report.sectionSeconds).reduce((a, b) => a + b, 0);
    process.stdout.write(`Sections: ${parts.join(', ')} (${(total / 60).toFixed(1)} min).\n\n`);
  }
  process.stdout.write(`${formatTable(report.rows)}\n\n`);
}
