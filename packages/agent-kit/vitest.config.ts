// Vitest: unit tests beside the code, scenarios and the simulator under test/. The same suite
// runs on PGlite (default) and on Postgres when DATABASE_URL is set.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/harness/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
