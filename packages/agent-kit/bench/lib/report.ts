// The benchmark's output: one row per metric (agent-kit, baseline, ratio, target, pass/fail),
// printed as a table and written as JSON with the machine it ran on. A target is checked here,
// in one place, so the table and the JSON can never disagree about a pass.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** How a row is judged: the ratio to the baseline, or the value itself, against a bound. */
export type Target =
  | { kind: 'ratio-at-least'; value: number }
  | { kind: 'at-most'; value: number }
  | { kind: 'at-least'; value: number };

export interface Row {
  section: string;
  metric: string;
  unit: string;
  agentKit: number;
  baseline?: number;
  baselineName?: string;
  target?: Target;
  note?: string;
}

export interface JudgedRow extends Row {
  ratio?: number;
  pass?: boolean;
}

export interface Report {
  store: 'postgres' | 'embedded';
  startedAt: string;
  command: string;
  machine: Record<string, unknown>;
  /** Wall-clock seconds each section took, in the order run (the whole bench must stay under 10 minutes). */
  sectionSeconds?: Record<string, number>;
  rows: JudgedRow[];
  /** Query plans and other evidence, by name. */
  artifacts: Record<string, unknown>;
}

/** Add the ratio and the pass/fail verdict to a row. */
export function judge(row: Row): JudgedRow {
  const ratio = row.baseline && row.baseline > 0 ? row.agentKit / row.baseline : undefined;
  const target = row.target;
  if (!target || !Number.isFinite(row.agentKit)) return { ...row, ratio };
  if (target.kind === 'ratio-at-least') return { ...row, ratio, pass: ratio !== undefined && ratio >= target.value };
  if (target.kind === 'at-most') return { ...row, ratio, pass: row.agentKit <= target.value };
  return { ...row, ratio, pass: row.agentKit >= target.value };
}

function describeTarget(target: Target | undefined): string {
  if (!target) return '';
  if (target.kind === 'ratio-at-least') return `≥ ${target.value}×`;
  if (target.kind === 'at-most') return `≤ ${formatNumber(target.value)}`;
  return `≥ ${formatNumber(target.value)}`;
}

/** Numbers with a sensible number of digits for a table. */
export function formatNumber(value: number | undefined): string {
  if (value === undefined || Number.isNaN(value)) return '';
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toLocaleString('en-US');
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

const columns = ['metric', 'unit', 'agent-kit', 'baseline', 'ratio', 'target', 'pass'] as const;

function cells(row: JudgedRow): string[] {
  return [
    row.metric,
    row.unit,
    formatNumber(row.agentKit),
    row.baseline === undefined ? '' : `${formatNumber(row.baseline)} (${row.baselineName ?? 'baseline'})`,
    row.ratio === undefined ? '' : `${row.ratio.toFixed(2)}×`,
    describeTarget(row.target),
    row.pass === undefined ? '' : row.pass ? 'pass' : 'FAIL',
  ];
}

/** The report as a Markdown table (also readable in a terminal), grouped by section. */
export function formatTable(rows: readonly JudgedRow[]): string {
  const lines = [`| ${columns.join(' | ')} |`, `|${columns.map(() => ' --- ').join('|')}|`];
  let section = '';
  for (const row of rows) {
    if (row.section !== section) {
      section = row.section;
      lines.push(`| **${section}** |${columns.slice(1).map(() => ' ').join('|')}|`);
    }
    lines.push(`| ${cells(row).join(' | ')} |`);
  }
  return lines.join('\n');
}

/** Cores, memory, Node and (when given) the server's version: where the numbers came from. */
export function machineInfo(serverVersion?: string): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    postgres: serverVersion,
  };
}

/** Write the report to `<dir>/<date>-<store>.json`; returns the path. */
export function writeReport(dir: string, report: Report): string {
  fs.mkdirSync(dir, { recursive: true });
  const date = report.startedAt.slice(0, 10);
  const file = path.join(dir, `${date}-${report.store}.json`);
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}
