#!/usr/bin/env node
// The agent-kit command line; the code lives in dist/cli (built by `npm run build`).
import { main } from '../dist/cli/main.js';

main(process.argv).then(
  (code) => { process.exitCode = code; },
  (error) => { console.error(error instanceof Error ? error.message : error); process.exitCode = 1; },
);
