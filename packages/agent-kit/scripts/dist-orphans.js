// Before a pack: refuse a dist/ that holds output of a source file deleted since it was built.
// tsc never removes what it wrote, so such a file would be published, stale, beside the rest.
// (The build does not clear dist/ itself: tests and a running server read it while it rebuilds.)
import fs from 'node:fs';
import path from 'node:path';

const root = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const dist = path.join(root, 'dist');
const orphans = [];
for (const entry of fs.readdirSync(dist, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile()) continue;
  const file = path.relative(dist, path.join(entry.parentPath, entry.name));
  const stem = file.replace(/(\.d)?\.js(\.map)?$|\.d\.ts(\.map)?$/, '');
  if (stem === file) continue;
  if (!fs.existsSync(path.join(root, 'src', `${stem}.ts`))) orphans.push(`dist/${file}`);
}
if (orphans.length > 0) {
  console.error(`error: dist/ holds ${orphans.length} file(s) of deleted sources, which a pack would publish: ` +
    `${orphans.slice(0, 5).join(', ')}${orphans.length > 5 ? ', …' : ''}. Run \`rm -rf dist && npm run build\`, then pack again.`);
  process.exit(1);
}
