// The package as a user gets it: `npm pack` of this folder (what `npm publish` would upload),
// installed from the tarball into an empty project outside the repository, then every named
// TypeScript example of the READMEs and the guides typechecked against the installed types and
// the runnable ones run against the installed code, and its `agent-kit` command run. Catches a
// file left out of the tarball, an export or a declaration that does not resolve, and an example
// that no longer matches the API; the guide's React chat is also bundled and run in Chromium
// (browser-chat.ts). Runs once, in the Postgres pass (DATABASE_URL set), which had
// the time to spare: the examples run on an empty database that `agent-kit migrate` sets up, as
// a server deployment does, and one turn of the command runs on the embedded store.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageDir, run, type RunResult } from '../hostile/cli-kit.js';
import { adminQuery, databasePrefix, onPostgres, urlForDatabase } from '../harness/test-db.js';
import pg from 'pg';
import { browserUser, checkBrowserChat, killGroup, until, writeBrowserChat, type BrowserRun } from './browser-chat.js';
import { readDocExamples, type DocExample } from './doc-examples.js';

const repoRoot = path.resolve(packageDir, '../..');
const docFiles = [
  'README.md', 'packages/agent-kit/README.md',
  ...['docs/guides', 'docs/reference'].flatMap((dir) => fs.readdirSync(path.join(repoRoot, dir))
    .filter((name) => name.endsWith('.md')).sort().map((name) => `${dir}/${name}`)),
];
const manifest = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
const lockfile = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package-lock.json'), 'utf8'));
/** `name` at the version this repository's lockfile installs: the one the suite tests. */
const locked = (name: string) => `${name}@${lockfile.packages[`node_modules/${name}`].version}`;
/**
 * The app's own `ai`: a later 6.x than the lockfile's, as an app has that installed `ai` after
 * this release. The library takes `ai` as a range (ADR-0103), so the app and agent-kit share it.
 */
const appAi = 'ai@6.0.333';

/** Files the examples import that the docs leave to the reader. */
const fixtures: Record<string, string> = {
  // operating.md's runtime-options.ts imports the app's tools from here.
  'tools.ts': "import { sendInvoice } from './send-invoice.js';\n\nexport const tools = { send_invoice: sendInvoice };\n",
  // What SvelteKit generates for a +server.ts, reduced to what the examples use.
  'src/routes/api/chat/$types.d.ts':
    'export type RequestHandler = (event: { request: Request; params: Record<string, string> }) => Promise<Response>;\n',  // The Next.js example's session: here the user a header names, as in the Node server's example.
  // A browser page sends a cookie instead (the React chat in Chromium).
  'lib/session.ts': "export async function userIdOf(request: Request): Promise<string | null> {\n" +
    "  const cookie = /(?:^|;\\s*)user=([^;]+)/.exec(request.headers.get('cookie') ?? '')?.[1];\n" +
    "  return request.headers.get('x-user-id') ?? cookie ?? null;\n}\n",
};

/**
 * The guide's React component needs React and the AI SDK's React hook (3.x is AI SDK 6's), which
 * agent-kit itself does not: the Next.js example's project installs them, as a user's would.
 */
const reactPackages = ['@ai-sdk/react@3.0.328', 'react@19.3.1', 'react-dom@19.3.1', '@types/react@19.3.2', '@types/react-dom@19.3.0'];

/** Next.js (App Router) files: checked with Next's settings (bundler resolution, the @/ alias, JSX). */
const isNext = (file: string) => file.startsWith('app/') || file.startsWith('lib/');

function stale(): string | undefined {
  const built = path.join(packageDir, 'dist', 'index.js');
  if (!fs.existsSync(built)) return 'dist/ is missing: run `npm run build -w agent-kit` first';
  const newest = (dir: string): number => Math.max(0, ...fs.readdirSync(dir, { withFileTypes: true }).map((e) =>
    e.isDirectory() ? newest(path.join(dir, e.name))
      : e.name.endsWith('.test.ts') ? 0 : fs.statSync(path.join(dir, e.name)).mtimeMs));
  return newest(path.join(packageDir, 'src')) > fs.statSync(built).mtimeMs
    ? 'dist/ is older than src/: run `npm run build -w agent-kit` first' : undefined;
}

/** What `agent-kit runs --json` says of a run, as far as the examples are judged by it. */
interface ListedRun { id: string; status: string; effects: number; threadId: string; turnNo: number }

function explain(result: RunResult): string {
  return `exit ${result.code}${result.timedOut ? ' (timed out)' : ''}\n${result.stdout}\n${result.stderr}`;
}

describe.runIf(onPostgres)('the published package', () => {
  const docs = readDocExamples(repoRoot, docFiles);
  const database = `${databasePrefix}package`; // dropped with the run's other test databases
  let work = '';
  let project = '';
  let packed: string[] = [];

  /**
   * The environment of every example and command: the empty database of this file (one for all
   * examples, told apart by their runs), none of our other variables. `embedded`: the store in
   * the project's `./.agent-kit` instead.
   */
  function env(store: 'postgres' | 'embedded' = 'postgres'): NodeJS.ProcessEnv {
    const kept: NodeJS.ProcessEnv = {};
    for (const [key, value] of Object.entries(process.env)) {
      if (!/^(DATABASE_URL|AGENT_KIT_|VITEST|NODE_OPTIONS$)/.test(key)) kept[key] = value;
    }
    return store === 'postgres' ? { ...kept, DATABASE_URL: urlForDatabase(database) } : kept;
  }
  const tsx = (file: string, o: { tsconfig?: string; env?: NodeJS.ProcessEnv } = {}) => run(process.execPath,
    [path.join(project, 'node_modules', 'tsx', 'dist', 'cli.mjs'), ...(o.tsconfig ? ['--tsconfig', o.tsconfig] : []), file],
    { cwd: project, env: { ...env(), ...o.env }, timeoutMs: 120_000 });
  const agentKit = (args: string[], store?: 'postgres' | 'embedded') => run(path.join(project, 'node_modules', '.bin', 'agent-kit'),
    args, { cwd: project, env: env(store), timeoutMs: 120_000 });
  const seen = new Set<string>();
  /** The runs that appeared in the store since the last call, oldest first. */
  async function newRuns(store?: 'postgres' | 'embedded'): Promise<ListedRun[]> {
    const listed = await agentKit(['runs', '--json', '--limit', '1000'], store);
    expect(listed.code, explain(listed)).toBe(0);
    const fresh = (JSON.parse(listed.stdout) as ListedRun[]).filter((r) => !seen.has(r.id)).reverse();
    for (const r of fresh) seen.add(r.id);
    return fresh;
  }
  const example = (file: string): DocExample => {
    const found = docs.examples.find((e) => e.file === file);
    if (!found) throw new Error(`no example names ${file} in ${docFiles.join(', ')}`);
    return found;
  };

  beforeAll(async () => {
    const why = stale();
    if (why) throw new Error(why);
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-kit-package-'));
    const pack = await run('npm', ['pack', '--json', '--pack-destination', work], { cwd: packageDir, timeoutMs: 120_000 });
    if (pack.code !== 0) throw new Error(`npm pack failed: ${explain(pack)}`);
    const [info] = JSON.parse(pack.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    packed = info!.files.map((f) => f.path);

    project = path.join(work, 'app');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'),
      JSON.stringify({ name: 'agent-kit-consumer', private: true, type: 'module' }, null, 2));
    const install = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund',
      path.join(work, info!.filename), appAi, locked('zod'), locked('tsx'), locked('typescript'), locked('@types/node'),
      ...reactPackages],
    { cwd: project, timeoutMs: 240_000 });
    if (install.code !== 0) throw new Error(`npm install of the tarball failed: ${explain(install)}`);

    for (const [file, code] of [...docs.examples.map((e) => [e.file, e.code]), ...Object.entries(fixtures)]) {
      fs.mkdirSync(path.dirname(path.join(project, file!)), { recursive: true });
      fs.writeFileSync(path.join(project, file!), code!);
    }
    // An empty database, and the command a server deployment runs first.
    await adminQuery(`drop database if exists ${database} with (force)`);
    await adminQuery(`create database ${database}`);
    const migrated = await agentKit(['migrate']);
    if (migrated.code !== 0) throw new Error(`agent-kit migrate failed: ${explain(migrated)}`);
    // Numbered as the files and the schema check's errors are (it said "schema at 39").
    expect(migrated.stdout.trim()).toMatch(/^applied 0001, 0002, (\d{4}, )*(\d{4}); schema at \2 \(postgres, [^,]+, schema public\)$/);
    const strict = { target: 'ES2022', strict: true, skipLibCheck: true, noEmit: true, types: ['node'] };
    const node = docs.examples.filter((e) => !e.file.startsWith('src/') && !isNext(e.file)).map((e) => e.file);
    const svelteKit = docs.examples.filter((e) => e.file.startsWith('src/')).map((e) => e.file);
    const next = docs.examples.filter((e) => isNext(e.file)).map((e) => e.file);
    fs.writeFileSync(path.join(project, 'tsconfig.node.json'), JSON.stringify({
      compilerOptions: { ...strict, module: 'NodeNext', moduleResolution: 'NodeNext' }, files: node,
    }));
    // SvelteKit's own settings: bundler resolution and the $lib alias.
    fs.writeFileSync(path.join(project, 'tsconfig.sveltekit.json'), JSON.stringify({
      compilerOptions: { ...strict, module: 'ESNext', moduleResolution: 'bundler', paths: { '$lib/*': ['./src/lib/*'] } },
      files: svelteKit,
    }));
    fs.writeFileSync(path.join(project, 'tsconfig.next.json'), JSON.stringify({
      compilerOptions: { ...strict, module: 'ESNext', moduleResolution: 'bundler', jsx: 'react-jsx', paths: { '@/*': ['./*'] } },
      files: next,
    }));
  }, 420_000);

  afterAll(async () => {
    if (work) fs.rmSync(work, { recursive: true, force: true });
    await adminQuery(`drop database if exists ${database} with (force)`).catch(() => {});
  });

  it('holds the built library, its declarations, the migrations, the command, a README and the license', () => {
    const targets = Object.values(manifest.exports as Record<string, Record<string, string>>)
      .flatMap((entry) => Object.values(entry)).concat(Object.values(manifest.bin as Record<string, string>))
      .map((target) => path.normalize(target));
    expect(targets.length).toBeGreaterThan(4);
    for (const target of targets) expect(packed, target).toContain(target);
    const migrations = fs.readdirSync(path.join(packageDir, 'sql', 'migrations')).map((f) => `sql/migrations/${f}`);
    expect(migrations.length).toBeGreaterThan(20);
    for (const migration of migrations) expect(packed).toContain(migration);
    for (const file of ['README.md', 'LICENSE', 'package.json', 'dist/cli/main.js']) expect(packed).toContain(file);
    expect(packed.filter((f) => /(^|\/)(src|test|bench|scripts)\/|\.test\.|tsbuildinfo|\.scratch/.test(f))).toEqual([]);
  });

  it('carries its TypeScript inside its source maps, which point at src/, left out of the tarball', () => {
    // An adopter's stack traces (node --enable-source-maps, vitest) and debugger named
    // node_modules/agent-kit/src/*.ts, files the tarball does not hold (an outsider's trial).
    const maps = packed.filter((f) => f.endsWith('.js.map'));
    expect(maps.length).toBeGreaterThan(50);
    for (const file of maps) {
      const map = JSON.parse(fs.readFileSync(path.join(project, 'node_modules', 'agent-kit', file), 'utf8')) as {
        sources: string[]; sourcesContent?: (string | null)[];
      };
      expect(map.sourcesContent?.length, file).toBe(map.sources.length);
      expect(map.sourcesContent!.every((text) => typeof text === 'string' && text.length > 0), file).toBe(true);
    }
  });

  it('shares the app\'s own ai, zod and pg instead of installing copies of its own', () => {
    // Every runtime dependency is a range from the version tested (ADR-0103): an exact pin put a
    // second copy of ai in an app that had a later one, and a third in a Next.js bundle.
    for (const [name, range] of Object.entries(manifest.dependencies as Record<string, string>)) {
      expect(range, name).toMatch(/^\^\d/);
    }
    const resolved = (from: string, name: string) =>
      createRequire(path.join(from, 'package.json')).resolve(`${name}/package.json`);
    const library = path.join(project, 'node_modules', 'agent-kit');
    for (const name of ['ai', 'zod', 'pg']) expect(resolved(library, name), name).toBe(resolved(project, name));
    expect(JSON.parse(fs.readFileSync(resolved(library, 'ai'), 'utf8')).version).toBe(appAi.split('@')[1]);
  });

  it('finds every TypeScript example of the docs named after its file, once', () => {
    expect(docs.unnamed).toEqual([]);
    const names = docs.examples.map((e) => e.file);
    expect(new Set(names).size, names.join(', ')).toBe(names.length);
    for (const file of ['quickstart.ts', 'chat-and-cron.ts', 'turn-once.ts', 'queue-turns.ts', 'send-invoice.ts',
      'server.ts', 'try-tool.ts', 'instructions.ts', 'runtime-options.ts', 'worker.ts', 'src/lib/server/agent.ts',
      'lib/agent.ts', 'app/api/[...path]/route.ts', 'lib/chat.ts', 'app/chat/chat.tsx']) {
      expect(names).toContain(file);
    }
  });

  it('typechecks every example against the installed declarations (Node, SvelteKit and Next.js settings)', async () => {
    const tsc = path.join(project, 'node_modules', 'typescript', 'bin', 'tsc');
    for (const config of ['tsconfig.node.json', 'tsconfig.sveltekit.json', 'tsconfig.next.json']) {
      const checked = await run(process.execPath, [tsc, '-p', config], { cwd: project, timeoutMs: 120_000 });
      expect(checked.stdout, `${config}: ${explain(checked)}`).toBe('');
      expect(checked.code).toBe(0);
    }
  }, 240_000);

  it("runs the READMEs' examples: a completed turn whose tool ran once", async () => {
    for (const file of ['quickstart.ts', 'chat-and-cron.ts']) {
      const ran = await tsx(example(file).file);
      expect(ran.code, `${example(file).source}: ${explain(ran)}`).toBe(0);
      if (file === 'quickstart.ts') expect(ran.stdout).toMatch(/kind: 'closed',\s+status: 'completed'/);
      expect((await newRuns()).map((r) => [r.status, r.effects])).toEqual([['completed', 1]]);
    }
  }, 240_000);

  it("runs the guide's scripts: one turn, two queued turns in order, your own tool through approval", async () => {
    const once = await tsx('turn-once.ts');
    expect(once.code, explain(once)).toBe(0);
    expect(once.stdout).toMatch(/kind: 'closed',\s+status: 'completed'/);
    expect(once.stdout.match(/^\d+ [a-z-]+ \d+$/gm)?.map((line) => line.split(' ')[1])).toEqual([
      'message', 'run-queued', 'segment-started', 'step-finished', 'tool-result', 'text-delta', 'step-finished', 'run-closed',
    ]);

    const queued = await tsx('queue-turns.ts');
    expect(queued.code, explain(queued)).toBe(0);
    const tool = await tsx('try-tool.ts');
    expect(tool.code, explain(tool)).toBe(0);
    expect(tool.stdout).toMatch(/kind: 'parked', status: 'waiting_input'[\s\S]*kind: 'closed',\s+status: 'completed'/);

    const [onceRun, ...rest] = await newRuns();
    expect([onceRun!.status, onceRun!.effects]).toEqual(['completed', 1]);
    const [first, second, toolRun] = rest;
    expect([first, second].map((r) => [r!.turnNo, r!.status, r!.effects])).toEqual([[1, 'completed', 0], [2, 'completed', 0]]);
    expect(second!.threadId).toBe(first!.threadId);
    expect([toolRun!.status, toolRun!.effects, rest.length]).toEqual(['completed', 1, 3]); // send_invoice ran once
  }, 240_000);

  it("serves the guide's Node server: a chat turn streams to its end, and SIGTERM then SIGINT stop the process", async () => {
    const port = await freePort();
    // tsx as node's loader, not as the parent process its CLI is: on each signal the CLI waits
    // 30 ms for its child to say it got it, else kills the child and exits 128 + the signal's
    // number (a busy CI took longer, and exited 130). The server itself gets the signals here.
    const server = spawn(process.execPath, ['--import', 'tsx', 'server.ts'],
      { cwd: project, env: { ...env(), PORT: String(port) }, detached: true });
    let stderr = '';
    server.stderr.on('data', (chunk) => { stderr += String(chunk); });
    const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
    try {
      await until(() => stderr.includes('listening'), 60_000, () => `server.ts never listened: ${stderr}`);
      const response = await fetch(`http://127.0.0.1:${port}/api/chat`, {
        method: 'POST',
        headers: { 'x-user-id': 'alice', 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'Hi there', clientMessageId: 'm1' }),
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('x-agent-kit-run-id')).toMatch(/^[0-9a-f-]{36}$/);
      const stream = await response.text(); // the stream ends when the run closes
      expect(stream.match(/^event: (.+)$/gm)?.at(-1)).toBe('event: run-closed');
      expect(stream).toContain('"status":"completed"');
      const anonymous = await fetch(`http://127.0.0.1:${port}/api/threads`);
      expect(anonymous.status).toBe(401);
    } finally {
      // A deploy's SIGTERM and a Ctrl-C on top, to the process group as a terminal sends them:
      // it shuts down, and exits 0.
      process.kill(-server.pid!, 'SIGTERM');
      process.kill(-server.pid!, 'SIGINT');
    }
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), 30_000))]);
    killGroup(server.pid); // still running when the 30 s ran out: not left behind
    expect(code, stderr).toBe(0);
    expect((await newRuns()).map((r) => [r.status, r.effects])).toEqual([['completed', 0]]);
  }, 240_000);

  it("serves every route from the guide's Next.js catch-all route, and its useChat transport keeps a chat in one thread", async () => {
    // What Next.js does with the route module: call its exports with the request.
    fs.writeFileSync(path.join(project, 'next-route-check.ts'), [
      "import { GET, POST } from '@/app/api/[...path]/route';",
      "const alice = { 'x-user-id': 'alice' };",
      "const chat = await POST(new Request('http://localhost/api/chat', {",
      "  method: 'POST', headers: { ...alice, 'content-type': 'application/json' }, body: JSON.stringify({ message: 'Hi from Next' }),",
      '}));',
      'const stream = await chat.text(); // ends when the run closes',
      "const threadId = chat.headers.get('x-agent-kit-thread-id');",
      'const thread = await GET(new Request(`http://localhost/api/threads/${threadId}`, { headers: alice }));',
      "const stranger = await GET(new Request(`http://localhost/api/threads/${threadId}`, { headers: { 'x-user-id': 'mallory' } }));",
      "const elsewhere = await GET(new Request('http://localhost/api/elsewhere', { headers: alice }));",
      'const messages = ((await thread.json()) as { messages: Array<{ role: string }> }).messages.map((m) => m.role);',
      // useChat's side: two messages through agent-kit/client's transport, the second sent to the first's thread.
      "import { readUIMessageStream, type UIMessage } from 'ai';",
      "import { agentKitTransport, toUIMessages, type ThreadRead } from 'agent-kit/client';",
      "import { chatOptions } from '@/lib/chat';",
      "const transport = agentKitTransport({ origin: 'http://localhost',",
      "  fetch: (input, init) => (init?.method === 'POST' ? POST : GET)(new Request(input as string, { ...init, headers: { ...init?.headers as Record<string, string>, ...alice } })) });",
      'async function send(messages: UIMessage[], id: string, text: string): Promise<UIMessage[]> {',
      "  const sent = [...messages, { id, role: 'user' as const, parts: [{ type: 'text' as const, text }] }];",
      "  const read = await transport.sendMessages({ chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined, messages: sent });",
      '  let reply: UIMessage | undefined;',
      '  for await (const message of readUIMessageStream<UIMessage>({ stream: read })) reply = message;',
      '  return [...sent, reply!];',
      '}',
      "const chatted = await send(await send([], 'u1', 'Hi from useChat'), 'u2', 'And again');",
      // Reopened from the thread's read, as a page load does, and a third message sent.
      "const threadOf = (m: UIMessage) => (m.metadata as { threadId: string }).threadId;",
      "const ids = (messages: UIMessage[]) => messages.map((m) => m.id).join();",
      'const reread = await GET(new Request(`http://localhost/api/threads/${threadOf(chatted[1]!)}`, { headers: alice }));',
      'const rereadThread = (await reread.json()) as ThreadRead;',
      'const reopened = toUIMessages(rereadThread);',
      // The guide's component, rendered on the server as Next.js first renders a client component.
      "import { createElement } from 'react';",
      "import { renderToString } from 'react-dom/server';",
      "import { Chat } from '@/app/chat/chat';",
      "const html = renderToString(createElement(Chat, { thread: rereadThread })).replace(/<!-- -->/g, '');",
      "const shown = [...html.matchAll(/<p>([a-z]+): ([^<]*)<\\/p>/g)].map((m) => [m[1], m[2]!.length > 0]);",
      "const emptyChat = renderToString(createElement(Chat, {}));",
      "const after = await send(reopened, 'u3', 'Once more');",
      'const replies = after.filter((m) => m.role === \'assistant\').map((m) => m.metadata as { threadId: string; status?: string });',
      // A page reloaded while a reply streams: the POST's reader goes away after its first chunk
      // (no stop(): that would cancel the run), and useChat's resume (reconnectToStream) reads the
      // turn again from its start, to its end.
      "const sent = await transport.sendMessages({ chatId: 'c', trigger: 'submit-message', messageId: undefined, abortSignal: undefined,",
      "  messages: [...after, { id: 'u4', role: 'user', parts: [{ type: 'text', text: 'Reload me' }] }] });",
      'const dropped = sent.getReader();',
      'await dropped.read();',
      'await dropped.cancel();',
      'const midTurn = (await (await GET(new Request(`http://localhost/api/threads/${threadOf(after[1]!)}`, { headers: alice }))).json()) as',
      '  ThreadRead & { runs: Array<{ status: string }> };',
      'const resumed = await transport.reconnectToStream({ chatId: threadOf(after[1]!) });',
      'let reloaded: UIMessage | undefined;',
      'for await (const message of readUIMessageStream<UIMessage>({ stream: resumed! })) reloaded = message;',
      'const final = (await (await GET(new Request(`http://localhost/api/threads/${threadOf(after[1]!)}`, { headers: alice }))).json()) as',
      '  { messages: Array<{ runId: string | null; role: string; text: string }> };',
      "const stored = final.messages.at(-1)!;",
      'const shownText = reloaded!.parts.map((p) => (p.type === \'text\' ? p.text : \'\')).join(\'\');',
      // A question: the stream ends with it; the answer goes to the run's input route, and resume follows the rest.
      "const asked = (await send([], 'q1', 'Pick a colour #ask')).at(-1)!;",
      "const question = asked.parts.find((p) => p.type === 'data-agent-kit-input') as { data: { id: string; runId: string } };",
      'const askedThread = (await (await GET(new Request(`http://localhost/api/threads/${threadOf(asked)}`, { headers: alice }))).json()) as ThreadRead;',
      'const answered = await POST(new Request(`http://localhost/api/runs/${question.data.runId}/input`, {',
      "  method: 'POST', headers: { ...alice, 'content-type': 'application/json' }, body: JSON.stringify({ questionId: question.data.id, answer: 'blue' }),",
      '}));',
      'let afterAnswer: UIMessage | undefined;',
      'for await (const message of readUIMessageStream<UIMessage>({ stream: (await transport.reconnectToStream({ chatId: threadOf(asked) }))! })) afterAnswer = message;',
      "const askTool = afterAnswer!.parts.find((p) => p.type === 'tool-ask_user') as { state: string; output: unknown } | undefined;",
      // The same, the AI SDK's way: the AI SDK's chat (what useChat drives) with the guide's options,
      // a question answered with addToolOutput and sent by its sendAutomaticallyWhen.
      "import { AbstractChat, type ChatState } from 'ai';",
      'const held: UIMessage[] = [];',
      "const state: ChatState<UIMessage> = { status: 'ready', error: undefined, messages: held, pushMessage: (m) => { held.push(m); },",
      '  popMessage: () => { held.pop(); }, replaceMessage: (i, m) => { held[i] = m; }, snapshot: (t) => structuredClone(t) };',
      'class ArrayChat extends AbstractChat<UIMessage> {}',
      'const native = new ArrayChat({ ...chatOptions(), transport, state });',
      "await native.sendMessage({ text: 'Which colour? #ask' });",
      "const nativeQuestion = native.messages.at(-1)!.parts.find((p) => p.type === 'data-agent-kit-input') as { data: { id: string } };",
      "await native.addToolOutput({ tool: 'ask_user', toolCallId: nativeQuestion.data.id, output: { answer: 'green' } });",
      'const nativeStatus = () => (native.messages.at(-1)!.metadata as { status?: string }).status;',
      "for (let i = 0; i < 400 && !(native.status === 'ready' && nativeStatus() === 'completed'); i++) await new Promise((r) => setTimeout(r, 25));",
      "const nativeTool = native.messages.at(-1)!.parts.find((p) => p.type === 'tool-ask_user') as { state: string; output: unknown };",
      'console.log(JSON.stringify({',
      "  chat: chat.status, last: stream.match(/^event: (.+)$/gm)?.at(-1), thread: thread.status, messages,",
      '  stranger: stranger.status, elsewhere: elsewhere.status,',
      '  useChat: replies.map((r) => [r.status ?? null, r.threadId === replies[0]!.threadId]),',
      "  reopened: [reopened.map((m) => m.role), ids(reopened) === ids(chatted)],",
      "  rendered: [shown, html.includes('<p>user: Hi from useChat</p>'), /<input[^>]*disabled/.test(html), emptyChat.includes('<p>')],",
      "  asked: [(asked.metadata as { status: string }).status, answered.status, afterAnswer!.id === asked.id, askTool?.state, askTool?.output,",
      "    (afterAnswer!.metadata as { status: string }).status],",
      // The guide's useChat options resume a reopened chat only when a turn is not over.
      "  natively: [native.messages.map((m) => m.role), nativeStatus(), nativeTool.state, nativeTool.output],",
      "  resume: [chatOptions().resume ?? null, chatOptions(rereadThread).resume, chatOptions(midTurn).resume, chatOptions(askedThread).resume],",
      "  resumed: [['queued', 'running'].includes(midTurn.runs.at(-1)!.status) ? 'under way' : midTurn.runs.at(-1)!.status, stored.role, reloaded!.id === stored.runId, shownText === stored.text && shownText.length > 0, (reloaded!.metadata as { status: string }).status],",
      '}));',
      'process.exit(0);',
      '',
    ].join('\n'));
    // Words 40 ms apart, as a model streams them: the reload below comes while the reply streams.
    const ran = await tsx('next-route-check.ts', { tsconfig: 'tsconfig.next.json', env: { AGENT_KIT_SCRIPTED_DELAY_MS: '40' } });
    expect(ran.code, explain(ran)).toBe(0);
    expect(JSON.parse(ran.stdout.trim().split('\n').at(-1)!)).toEqual({
      chat: 200, last: 'event: run-closed', thread: 200, messages: ['user', 'assistant'], stranger: 404, elsewhere: 404,
      // The reopened replies carry no status (the read has none to give); the live ones do.
      useChat: [[null, true], [null, true], ['completed', true]],
      reopened: [['user', 'assistant', 'user', 'assistant'], true], // the ids they had live: as sent, and the runs'
      // The component shows the reopened chat's four messages, its input open; a new chat shows none.
      rendered: [[['user', true], ['assistant', true], ['user', true], ['assistant', true]], true, false, false],
      resumed: ['under way', 'assistant', true, true, 'completed'],
      resume: [null, false, true, true], // a new chat; all turns over; a reply streaming; a question waiting
      natively: [['user', 'assistant'], 'completed', 'output-available', { answer: 'green' }],
      asked: ['waiting_input', 200, true, 'output-available', { answer: 'blue' }, 'completed'],
    });
    const runs = await newRuns();
    expect(runs.map((r) => [r.status, r.turnNo])).toEqual([
      ['completed', 1], ['completed', 1], ['completed', 2], ['completed', 3], ['completed', 4], ['completed', 1], ['completed', 1],
    ]);
    expect(new Set(runs.slice(1, 5).map((r) => r.threadId)).size).toBe(1); // useChat's four messages, one thread
  }, 240_000);

  it("runs the guide's React chat in Chromium under StrictMode: a reply, a reload mid-reply resumed, Stop, a typed answer, another tab's turn live (not while hidden), answers, another origin, a reply longer than its streams, one held by an operator and one whose connection drops", async () => {
    writeBrowserChat(project);
    const client = new pg.Client({ connectionString: urlForDatabase(database) });
    await client.connect();
    try {
      const runs = async () => (await client.query<BrowserRun>(
        `select r.id, r.thread_id as "threadId", r.status, m.content->>'text' as text, m.partial
           from agent_kit_runs r join agent_kit_threads t on t.id = r.thread_id
           left join agent_kit_messages m on m.id = r.message_id
          where t.owner_id = $1 order by r.created_at`, [browserUser])).rows;
      // 60 words 60 ms apart: a reply takes about 4 s, so a reload and a stop land mid-reply.
      const effectsOf = async (runId: string) => (await client.query<{ n: number }>(
        'select count(*)::int as n from agent_kit_effects where run_id = $1', [runId])).rows[0]!.n;
      await checkBrowserChat({ project, runs, effectsOf, env: { ...env(), AGENT_KIT_SCRIPTED_TOKENS: '60', AGENT_KIT_SCRIPTED_DELAY_MS: '60' } });
      expect((await runs()).map((r) => r.status)).toEqual(['completed', 'completed', 'aborted', 'completed', 'completed', 'completed', 'completed', 'completed', 'completed', 'aborted', 'completed', 'completed', 'completed']);
    } finally {
      await client.end();
      await newRuns(); // the browser's runs are this test's, not the next one's, even when it fails
    }
  }, 240_000);

  it('runs the agent-kit command from the installed bin, on the server and on the embedded store', async () => {
    const version = await agentKit(['--version']);
    expect([version.code, version.stdout], explain(version)).toEqual([0, `${manifest.version}\n`]);
    const help = await agentKit(['--help']);
    expect(help.code, explain(help)).toBe(0);
    for (const command of [
      'cancel', 'chat', 'drain', 'enqueue', 'events', 'migrate', 'reap', 'release', 'resolve-effect', 'restore', 'runs', 'show',
      'takeover', 'worker',
    ]) {
      expect(help.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    }
    for (const store of ['postgres', 'embedded'] as const) {
      const chat = await agentKit(['chat', 'hello #effect'], store);
      expect(chat.code, explain(chat)).toBe(0);
      expect(chat.stderr).toContain('[tool record_effect: completed]'); // progress on stderr, the reply on stdout
      expect(chat.stdout.trim().split(' ').length).toBeGreaterThan(10);
      expect((await newRuns(store)).map((r) => [r.status, r.effects])).toEqual([['completed', 1]]);
    }
    expect(fs.existsSync(path.join(project, '.agent-kit', 'pgdata'))).toBe(true); // the embedded one, made by that turn
  }, 240_000);
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
