// Vitest for the reference app's browser tests. It deliberately skips the SvelteKit plugin:
// the tests drive the built server (`node build/index.js`) from outside, like a user would.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    // Starting the server and Chromium takes a few seconds on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
