// Vitest for the docs site: generator unit tests and the generated-site check (links, Chromium).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Opening every page in Chromium takes a few seconds on a 2-core machine.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // Both files write site/ and pages/adr/; run them one after the other.
    fileParallelism: false,
  },
});
