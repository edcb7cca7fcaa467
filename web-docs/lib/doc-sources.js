// Which Markdown files make up the docs site and where each one lands in site/. The sources
// stay where they are written (docs/, the repo root); only ADRs are copied into pages/adr/.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, join, relative, sep } from 'node:path';

/**
 * One page of the site. `sourcePath` is the original file, against which its relative links
 * resolve; `readPath` the file rendered (the original, or the ADR copy); `outPath` its posix path
 * relative to site/; `sectionId` null for top-level pages, whose sidebar label is `navTitle`.
 * The generator fills in `title`, `bodyHtml` and `sourceLabel`.
 * @typedef {{
 *   sourcePath?: string, readPath?: string, outPath: string, sectionId: string | null,
 *   navTitle?: string, isSectionIntro?: boolean,
 *   title?: string, bodyHtml?: string, sourceLabel?: string,
 * }} Page
 */

/** A file copied into the site as is (an image, a diagram).
 * @typedef {{ sourcePath: string, outPath: string }} Asset */

/**
 * The site's sections, in sidebar order. Each maps one docs/ folder to one site folder.
 * @type {{ id: string, title: string, dir: string, isCopied?: boolean }[]}
 */
export const sections = [
  { id: 'tutorial', title: 'Tutorial', dir: 'docs/tutorial' },
  { id: 'guides', title: 'Guides', dir: 'docs/guides' },
  { id: 'concepts', title: 'Concepts', dir: 'docs/concepts' },
  { id: 'reference', title: 'Reference', dir: 'docs/reference' },
  { id: 'adr', title: 'Decisions (ADRs)', dir: 'docs/adr', isCopied: true },
];

/** Root documents rendered as top-level pages when they exist, with their sidebar labels. */
export const rootDocuments = [
  { name: 'README.md', label: 'Project README' },
  { name: 'ARCHITECTURE.md', label: 'Architecture' },
  { name: 'CONTRIBUTING.md', label: 'Contributing' },
  { name: 'CHANGELOG.md', label: 'Changelog' },
];

/** A section folder's own introduction, shown above its page list, when it has one. */
const sectionIntroNames = new Set(['README.md', 'index.md']);

/**
 * Converts a path to forward slashes, the separator of URLs and of the site map.
 * @param {string} path
 */
export function toPosix(path) {
  return path.split(sep).join('/');
}

/**
 * Every `*.md` under `dir`, recursively, sorted by path; none when `dir` does not exist.
 * @param {string} dir
 * @returns {string[]}
 */
export function listMarkdownFiles(dir) {
  return listFiles(dir).filter((path) => path.endsWith('.md'));
}

/**
 * Every file under `dir`, recursively, sorted by path; none when `dir` does not exist.
 * @param {string} dir
 * @returns {string[]}
 */
export function listFiles(dir) {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) return [];
  /** @type {string[]} */
  const files = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...listFiles(path));
    else if (entry.isFile()) files.push(path);
  }
  return files.sort();
}

/**
 * Collects the site's pages from the files that exist: home, root documents, then sections.
 * @param {{ repoRoot: string, pagesDir: string }} paths
 * @returns {(Page & { sourcePath: string, readPath: string })[]}
 */
export function collectPages({ repoRoot, pagesDir }) {
  const indexPath = join(pagesDir, 'index.md');
  /** @type {(Page & { sourcePath: string })[]} */
  const pages = [
    { sourcePath: indexPath, outPath: 'index.html', sectionId: null, navTitle: 'Home' },
  ];
  for (const { name, label } of rootDocuments) {
    const sourcePath = join(repoRoot, name);
    if (!existsSync(sourcePath)) continue;
    const outPath = `${name.slice(0, -3).toLowerCase()}.html`;
    pages.push({ sourcePath, outPath, sectionId: null, navTitle: label });
  }
  for (const section of sections) {
    const sectionDir = join(repoRoot, section.dir);
    for (const sourcePath of listMarkdownFiles(sectionDir)) {
      const relPath = toPosix(relative(sectionDir, sourcePath));
      const isIntro = sectionIntroNames.has(relPath);
      const outName = isIntro ? 'index' : relPath.slice(0, -3);
      const outPath = `${section.id}/${outName}.html`;
      const readPath = section.isCopied ? join(pagesDir, section.id, relPath) : sourcePath;
      pages.push({ sourcePath, readPath, outPath, sectionId: section.id, isSectionIntro: isIntro });
    }
  }
  return pages.map((page) => ({ ...page, readPath: page.readPath ?? page.sourcePath }));
}

/**
 * Non-Markdown files in the section folders (images, diagrams) copied beside the pages.
 * @param {{ repoRoot: string }} paths
 * @returns {Asset[]}
 */
export function collectAssets({ repoRoot }) {
  /** @type {Asset[]} */
  const assets = [];
  for (const section of sections) {
    const sectionDir = join(repoRoot, section.dir);
    for (const sourcePath of listFiles(sectionDir)) {
      if (sourcePath.endsWith('.md')) continue;
      const outPath = `${section.id}/${toPosix(relative(sectionDir, sourcePath))}`;
      assets.push({ sourcePath, outPath });
    }
  }
  // Shared images (screenshots the root README and the guides show) live in docs/images/.
  const imagesDir = join(repoRoot, 'docs', 'images');
  for (const sourcePath of listFiles(imagesDir)) {
    assets.push({ sourcePath, outPath: `images/${toPosix(relative(imagesDir, sourcePath))}` });
  }
  return assets;
}

/**
 * The title a page gets when its Markdown has no level-one heading: its file name.
 * @param {string} path
 */
export function titleFromFileName(path) {
  const stem = basename(path, '.md').replace(/^\d+-/, '').replace(/[-_]+/g, ' ');
  return stem.charAt(0).toUpperCase() + stem.slice(1);
}
