// `npm start`: builds the app when build/ is missing or older than its sources, then runs the
// built server (build/index.js) in this process with PORT 5173 and HOST 127.0.0.1 by default,
// the embedded store in ./.agent-kit of the folder `npm start` was run from, and ORIGIN set to
// the address it serves (adapter-node otherwise assumes https, which breaks form posts).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ensureBuild, serverEntry } from './ensure-build.js';

if (!ensureBuild()) process.exit(1);

process.env.PORT ||= '5173';
process.env.HOST ||= '127.0.0.1';
const url = `http://${process.env.HOST}:${process.env.PORT}`;
process.env.ORIGIN ||= url;
// npm runs workspace scripts inside the workspace; INIT_CWD is where the user typed `npm start`,
// so a root `npm start` keeps its data in <repo>/.agent-kit, where the agent-kit CLI looks too.
if (!process.env.DATABASE_URL) {
  process.env.AGENT_KIT_DATA_DIR ||= join(process.env.INIT_CWD || process.cwd(), '.agent-kit');
}
console.log(`sveltekit-chat: starting build/index.js; open ${url}`);

// Importing the entry runs the server here rather than in a child process: signals reach
// adapter-node's graceful shutdown directly, and no orphan outlives a killed parent.
await import(pathToFileURL(serverEntry).href);
