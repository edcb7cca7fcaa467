// `agent-kit reap`: one reaper pass. Requeues runs whose lease expired (attempts left) or salvages
// them (crash budget used up). Prints the report as JSON.
import type { Command } from 'commander';
import { positiveNumber, withRuntime } from './with-runtime.js';

export function register(program: Command) {
  program
    .command('reap')
    .description('hand expired runs back to the queue, or salvage those out of attempts')
    .option('--limit <n>', 'expired runs per pass (default 100)', positiveNumber('--limit', 1000, true))
    .action(async (options: { limit?: number }) => {
      const { reapExpiredRuns } = await import('../../reaper/reap-expired-runs.js');
      const report = await withRuntime((rt) => reapExpiredRuns(rt, { limit: options.limit }), undefined, false);
      console.log(JSON.stringify(report));
    });
}
