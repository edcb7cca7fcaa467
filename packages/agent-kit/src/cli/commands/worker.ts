// `agent-kit worker [--concurrency N] [--poll-ms MS]`: drain + reap on a loop until SIGTERM or
// SIGINT; then it takes no new work, lets running segments park at their next step boundary,
// and exits 0. Logs JSON lines on stderr.
import type { Command } from 'commander';
import { positiveNumber, stopOnSignals, withRuntimeWhenAvailable } from './with-runtime.js';

export function register(program: Command) {
  program
    .command('worker')
    .description('long-running: drain and reap until SIGTERM or SIGINT')
    .addHelpText('after', `
It runs turns with the demo tools only and no instructions. An app with tools or options of its
own runs runWorker(rt) in a process of its own, with the app's runtime (docs/guides/operating.md).`)
    .option('--concurrency <n>', 'segments at once (default 4)', positiveNumber('--concurrency', 100, true))
    .option('--poll-ms <ms>', 'slowest look for work and expired leases (default 1000)', positiveNumber('--poll-ms', 60_000, true))
    .action(async (options: { concurrency?: number; pollMs?: number }) => {
      const stopping = stopOnSignals();
      try {
        const { runWorker } = await import('../../worker/run-worker.js');
        await withRuntimeWhenAvailable((rt) => runWorker(rt, {
          signal: stopping.signal, concurrency: options.concurrency, pollMs: options.pollMs,
        }), stopping.signal);
      } finally {
        stopping.dispose();
      }
    });
}
