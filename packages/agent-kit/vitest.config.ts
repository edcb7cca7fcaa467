// Vitest: unit tests beside the code, scenarios and the simulator under test/. The same suite
// runs on PGlite (default) and on Postgres when DATABASE_URL is set.
import { defineConfig } from 'vitest/config';
import { longestFirst } from './test/harness/longest-first.js';

// One id per test run, inherited by the workers: its template and databases carry it, so two
// runs on one server (CI's two passes, several engineers) never drop each other's databases.
process.env.AGENT_KIT_TEST_RUN ??= `r${process.pid}`;

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/harness/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // CI adds a JSON report per run (AGENT_KIT_TEST_REPORT=<path prefix>) to sum up at the end.
    reporters: process.env.AGENT_KIT_TEST_REPORT ? ['default', 'json'] : ['default'],
    outputFile: process.env.AGENT_KIT_TEST_REPORT ? { json: `${process.env.AGENT_KIT_TEST_REPORT}-agent-kit.json` } : undefined,
    pool: 'forks',
    // On PGlite the database runs inside each worker: two workers kept this 2-core machine 81 %
    // busy, and a third took the suite from 323 s to 289 s only by slowing every test by a third.
    // On Postgres the workers wait on the server's round trips (a third of the CPU idle with two):
    // a third worker took the suite from 294 s to 220 s, each test about 12 % slower (ADR-0126).
    maxWorkers: process.env.DATABASE_URL ? 3 : 2,
    // One process per worker for all its files, not one per file: a new process imports everything
    // again and warms PGlite up cold. With the order below, the embedded suite took 348 s instead
    // of 442 s here, and the Postgres one 255 s (347 s in the CI run before). Every test
    // file restores what it changes (environment, fake timers), which this relies on.
    isolate: false,
    // The files that take a minute or more on one store or the other, longest first.
    sequence: {
      sequencer: longestFirst([
        'test/package/published-package.test.ts', 'src/cli/commands/chat-command.test.ts', 'test/simulation/runs.sim.test.ts',
        'test/hostile/cli.test.ts', 'src/store/pglite-maintenance.test.ts', 'src/lease/lease.property.test.ts',
      ]),
    },
  },
});
