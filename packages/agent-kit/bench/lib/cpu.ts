// CPU time over an interval: this process's (user + system) and the whole machine's busy time
// from /proc/stat (Linux; elsewhere undefined), so a bench can say what a run costs in Node and
// what it costs everything else on the machine (Postgres and the kernel, on a bench box).
import fs from 'node:fs';

export interface CpuSnapshot {
  processUs: number;
  machineMs: number | undefined;
}

const ticksPerSecond = 100; // USER_HZ on Linux

function machineBusyMs(): number | undefined {
  try {
    const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = fields;
    return ((user! + nice! + system! + irq! + softirq! + (steal ?? 0)) * 1000) / ticksPerSecond;
  } catch {
    return undefined;
  }
}

export function cpuSnapshot(): CpuSnapshot {
  const usage = process.cpuUsage();
  return { processUs: usage.user + usage.system, machineMs: machineBusyMs() };
}

/** Milliseconds of CPU since `start`: this process, and the rest of the machine (if known). */
export function cpuSince(start: CpuSnapshot): { processMs: number; restMs: number | undefined } {
  const now = cpuSnapshot();
  const processMs = (now.processUs - start.processUs) / 1000;
  const machineMs = now.machineMs === undefined || start.machineMs === undefined ? undefined : now.machineMs - start.machineMs;
  return { processMs, restMs: machineMs === undefined ? undefined : Math.max(0, machineMs - processMs) };
}
