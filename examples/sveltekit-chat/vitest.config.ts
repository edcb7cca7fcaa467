// Vitest for the reference app's browser tests. It deliberately skips the SvelteKit plugin:
// the tests drive the built server (`node build/index.js`) from outside, like a user would.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    globalSetup: ['tests/global-setup.ts'],
    // Each file runs its own server and Chromium; two at once on a 2-core box only slows both.
    // (Two at once took ~155-185 s instead of ~235-245 s, but a first send of the chat file then
    // timed out waiting for its thread's URL once in six runs: not worth a flaky CI.)
    fileParallelism: false,
    // Starting the server and Chromium takes a few seconds; a crash-and-takeover test waits
    // out a 5 s lease on top.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // CI adds a JSON report (AGENT_KIT_TEST_REPORT=<path prefix>) to sum up at the end.
    reporters: process.env.AGENT_KIT_TEST_REPORT ? ['default', 'json'] : ['default'],
    outputFile: process.env.AGENT_KIT_TEST_REPORT
      ? { json: `${process.env.AGENT_KIT_TEST_REPORT}-sveltekit-chat.json` }
      : undefined,
  },
});
