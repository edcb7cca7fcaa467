// The TypeScript examples of the README and the docs, as files a user would save: each ```ts
// (or ```tsx) block that opens with a comment naming its file (`// turn-once.ts: …`). The published-package
// test typechecks and runs them against the installed package.
import fs from 'node:fs';
import path from 'node:path';

export interface DocExample {
  /** The file the block names, e.g. `turn-once.ts` or `src/routes/api/chat/+server.ts`. */
  file: string;
  code: string;
  /** Where it is written, for a failure message: `docs/guides/using-agent-kit.md:45`. */
  source: string;
}

export interface DocExamples {
  examples: DocExample[];
  /** ```ts and ```tsx blocks that import agent-kit but name no file: examples nobody would test. */
  unnamed: string[];
}

const header = /^\/\/ ((?:[\w.+$[\]-]+\/)*[\w.+-]+\.tsx?)\b/;

/** The examples of `files` (paths relative to `root`), in the order they appear. */
export function readDocExamples(root: string, files: string[]): DocExamples {
  const examples: DocExample[] = [];
  const unnamed: string[] = [];
  for (const file of files) {
    const lines = fs.readFileSync(path.join(root, file), 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (lines[i] !== '```ts' && lines[i] !== '```tsx') continue;
      const end = lines.indexOf('```', i + 1);
      if (end < 0) throw new Error(`${file}:${i + 1}: a \`\`\`${lines[i]!.slice(3)} block that never ends`);
      const body = lines.slice(i + 1, end);
      const named = header.exec(body[0] ?? '');
      const source = `${file}:${i + 1}`;
      if (named) examples.push({ file: named[1]!, code: `${body.join('\n')}\n`, source });
      else if (body.some((line) => /from 'agent-kit(\/\w+)?'/.test(line))) unnamed.push(source);
      i = end;
    }
  }
  return { examples, unnamed };
}
