// Vitest: unit tests beside the code, scenarios and the simulator under test/. The same suite
// runs on PGlite (default) and on Postgres when DATABASE_URL is set.
import { defineConfig } from 'vitest/config';

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
    maxWorkers: 2,
  },
});
