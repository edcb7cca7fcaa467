// Vitest for the docs site: generator unit tests and the generated-site check (links, Chromium).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Opening every page in Chromium takes a few seconds on a 2-core machine.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // CI adds a JSON report (AGENT_KIT_TEST_REPORT=<path prefix>) to sum up at the end.
    reporters: process.env.AGENT_KIT_TEST_REPORT ? ['default', 'json'] : ['default'],
    outputFile: process.env.AGENT_KIT_TEST_REPORT
      ? { json: `${process.env.AGENT_KIT_TEST_REPORT}-web-docs.json` }
      : undefined,
    // Both files write site/ and pages/adr/; run them one after the other.
    fileParallelism: false,
  },
});
