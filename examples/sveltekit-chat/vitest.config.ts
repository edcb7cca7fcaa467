// Vitest for the reference app's browser tests. It deliberately skips the SvelteKit plugin:
// the tests drive the built server (`node build/index.js`) from outside, like a user would.
import { defineConfig } from 'vitest/config';
import { longestFirst } from '../../packages/agent-kit/test/harness/longest-first';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    globalSetup: ['tests/global-setup.ts'],
    // Each file runs its own server and Chromium. The browser tests mostly wait (tokens streamed
    // at 40 ms, leases running out, servers restarting), so two files at once overlap their
    // waits on a 2-core box: about 155-185 s for the suite instead of 235-250 s, one by one.
    // (Tried before and put back when a chat test's first send timed out under that load: the
    // cause was the app's, a sidebar refresh cancelling the move to a new thread's URL, fixed in
    // Chat.svelte with a test that holds that page back.)
    fileParallelism: true,
    maxWorkers: 2,
    // The long files first (chat and takeover, one per worker), so the short ones fill in around them.
    sequence: { sequencer: longestFirst(['tests/chat.test.ts', 'tests/takeover.test.ts', 'tests/ops.test.ts']) },
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
