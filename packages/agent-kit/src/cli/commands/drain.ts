// `agent-kit drain [--budget SECONDS] [--concurrency N]`: one invocation's worth of queue drain.
// Prints the report as JSON; exits 1 when a segment or a take failed (the jobs stay queued).
import { type Command, CommanderError } from 'commander';
import { positiveNumber, stopOnSignals, withRuntime } from './with-runtime.js';

export function register(program: Command) {
  program
    .command('drain')
    .description('take due jobs and run their segments, within one invocation budget')
    .addHelpText('after', `
It runs turns with the demo tools only and no instructions. An app with tools or options of its
own runs drainQueue(rt) in a process of its own, with the app's runtime (docs/guides/operating.md).`)
    .option('--budget <seconds>', 'invocation budget (default AGENT_KIT_INVOCATION_BUDGET)', positiveNumber('--budget', 3_600))
    .option('--concurrency <n>', 'segments at once (default 4)', positiveNumber('--concurrency', 100, true))
    .action(async (options: { budget?: number; concurrency?: number }) => {
      const stopping = stopOnSignals();
      try {
        const { drainQueue } = await import('../../queue/drain-queue.js');
        const report = await withRuntime((rt) => drainQueue(rt, {
          budgetMs: options.budget === undefined ? undefined : options.budget * 1000,
          concurrency: options.concurrency,
          stopSignal: stopping.signal,
        }));
        console.log(JSON.stringify(report));
        if (report.errors > 0) throw new CommanderError(1, 'agent-kit.drainErrors', `${report.errors} error(s); see the log above`);
      } finally {
        stopping.dispose();
      }
    });
}
