// Builds the static docs site: copies docs/adr into pages/adr with a do-not-edit banner, renders
// every page through one template, and rewrites relative .md links to the pages they became.
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  collectAssets,
  collectPages,
  listMarkdownFiles,
  rootDocuments,
  sections,
  titleFromFileName,
  toPosix,
} from './doc-sources.js';
import { relativeHref, renderPage, stylesheetPath } from './page-template.js';
import { escapeHtml, renderMarkdown } from './render-markdown.js';

const webDocsDir = dirname(dirname(fileURLToPath(import.meta.url)));

/** Where the generator reads and writes unless told otherwise. */
export const defaultPaths = {
  repoRoot: dirname(webDocsDir),
  pagesDir: join(webDocsDir, 'pages'),
  siteDir: join(webDocsDir, 'site'),
};

/** The marker in pages/index.md that becomes the list of the root documents present. */
const rootPagesMarker = '<!-- gen:root-pages -->';

const genCommand = '`npm --prefix web-docs run gen`';

/** @typedef {import('./doc-sources.js').Page} Page */
/** @typedef {import('./doc-sources.js').Asset} Asset */
/** @typedef {{ page: string, href: string }} BrokenLink */

/**
 * Replaces pages/adr/ with fresh copies of docs/adr/*.md, each opening with a banner.
 * @param {{ repoRoot: string, pagesDir: string }} paths
 */
function copyAdrs({ repoRoot, pagesDir }) {
  const adrSection = sections.find((section) => section.isCopied);
  if (!adrSection) throw new Error('web-docs: no section is marked isCopied (expected adr)');
  const sourceDir = join(repoRoot, adrSection.dir);
  const copyDir = join(pagesDir, adrSection.id);
  // Removing first drops copies of ADRs that were renamed or deleted at the source.
  rmSync(copyDir, { recursive: true, force: true });
  for (const sourcePath of listMarkdownFiles(sourceDir)) {
    const relPath = relative(sourceDir, sourcePath);
    const banner = `> Copied from ${toPosix(relative(repoRoot, sourcePath))} by ${genCommand}`
      + ' — edit the original.';
    const copyPath = join(copyDir, relPath);
    mkdirSync(dirname(copyPath), { recursive: true });
    writeFileSync(copyPath, `${banner}\n\n${readFileSync(sourcePath, 'utf8')}`);
  }
}

/**
 * Maps absolute source paths (files and section folders) to their outPath in site/.
 * @param {{ repoRoot: string, pagesDir: string, pages: Page[], assets: Asset[] }} input
 */
function buildSiteMap({ repoRoot, pagesDir, pages, assets }) {
  /** @type {Map<string, string>} */
  const outPathBySource = new Map();
  for (const section of sections) {
    const indexOutPath = `${section.id}/index.html`;
    // Links to a section: its docs/ folder, or, from pages/index.md, `<id>/` or `<id>/index.md`.
    outPathBySource.set(join(repoRoot, section.dir), indexOutPath);
    outPathBySource.set(join(pagesDir, section.id), indexOutPath);
    outPathBySource.set(join(pagesDir, section.id, 'index.md'), indexOutPath);
  }
  for (const item of [...pages, ...assets]) {
    if (item.sourcePath) outPathBySource.set(item.sourcePath, item.outPath);
  }
  return outPathBySource;
}

/**
 * The link resolver for one page; broken targets are collected into `brokenLinks`.
 * @param {{ page: Page & { sourcePath: string }, repoRoot: string,
 *   outPathBySource: Map<string, string>, sourceBaseUrl: string, brokenLinks: BrokenLink[] }} input
 * @returns {import('./render-markdown.js').LinkResolver}
 */
function createLinkResolver({ page, repoRoot, outPathBySource, sourceBaseUrl, brokenLinks }) {
  return (href) => {
    if (href.startsWith('#') || href.startsWith('//') || /^[a-z][a-z0-9+.-]*:/i.test(href)) {
      return null; // Same-page anchors and external URLs stay as written.
    }
    const hashAt = href.indexOf('#');
    const fragment = hashAt === -1 ? '' : href.slice(hashAt);
    const pathPart = (hashAt === -1 ? href : href.slice(0, hashAt)).replace(/\?.*$/, '');
    const decoded = decodeURI(pathPart);
    // As on GitHub, a link starting with / is relative to the repository root.
    const target = decoded.startsWith('/')
      ? join(repoRoot, decoded)
      : resolve(dirname(page.sourcePath), decoded);
    const outPath = outPathBySource.get(target);
    if (outPath !== undefined) return { href: relativeHref(page.outPath, outPath) + fragment };
    const repoPath = toPosix(relative(repoRoot, target));
    if (existsSync(target) && !repoPath.startsWith('..')) {
      if (sourceBaseUrl) return { href: `${sourceBaseUrl}${repoPath}${fragment}` };
      return { repoPath };
    }
    brokenLinks.push({ page: page.outPath, href });
    // Kept in site terms so the site's link check names it too.
    return { href: pathPart.replace(/\.md$/, '.html') + fragment };
  };
}

/**
 * The list of pages a section index shows, as HTML.
 * @param {Page[]} sectionPages
 * @param {string} indexOutPath
 */
function renderSectionList(sectionPages, indexOutPath) {
  if (sectionPages.length === 0) return '<p>No pages in this section yet.</p>\n';
  const items = sectionPages.map(({ title, outPath }) => {
    const href = escapeHtml(relativeHref(indexOutPath, outPath));
    return `<li><a href="${href}">${escapeHtml(title ?? outPath)}</a></li>`;
  });
  return `<ul class="section-pages">\n${items.join('\n')}\n</ul>\n`;
}

/**
 * A page's Markdown; on the home page, with the root-documents marker filled in.
 * @param {Page & { sourcePath: string, readPath: string }} page
 * @param {string} repoRoot
 */
function readPageMarkdown(page, repoRoot) {
  const markdown = readFileSync(page.readPath, 'utf8');
  if (page.outPath !== 'index.html') return markdown;
  const rootLinks = rootDocuments
    .filter(({ name }) => existsSync(join(repoRoot, name)))
    .map(({ name, label }) => {
      const href = toPosix(relative(dirname(page.sourcePath), join(repoRoot, name)));
      return `- [${label}](${href})`;
    });
  const list = rootLinks.length > 0 ? rootLinks.join('\n') : 'None written yet.';
  return markdown.replace(rootPagesMarker, list);
}

/**
 * Generates the site into `siteDir` (replacing it). Returns the written page paths (relative to
 * siteDir) and the links whose target does not exist. `sourceBaseUrl`, when given (or set as
 * DOCS_SOURCE_BASE_URL), turns links to repository files outside the site into links there.
 * @param {{ repoRoot?: string, pagesDir?: string, siteDir?: string,
 *   sourceBaseUrl?: string }} [options]
 * @returns {{ siteDir: string, pagePaths: string[], brokenLinks: BrokenLink[] }}
 */
export function generateSite(options = {}) {
  const { repoRoot, pagesDir, siteDir } = { ...defaultPaths, ...options };
  const sourceBaseUrl = options.sourceBaseUrl ?? process.env.DOCS_SOURCE_BASE_URL ?? '';
  copyAdrs({ repoRoot, pagesDir });
  /** @type {Page[]} */
  const pages = [];
  const sourcePages = collectPages({ repoRoot, pagesDir });
  const assets = collectAssets({ repoRoot });
  const outPathBySource = buildSiteMap({ repoRoot, pagesDir, pages: sourcePages, assets });
  /** @type {BrokenLink[]} */
  const brokenLinks = [];

  for (const page of sourcePages) {
    const resolveLink = createLinkResolver({
      page, repoRoot, outPathBySource, sourceBaseUrl, brokenLinks,
    });
    const { html, title } = renderMarkdown(readPageMarkdown(page, repoRoot), { resolveLink });
    const pageTitle = title ?? titleFromFileName(page.sourcePath);
    pages.push({
      ...page,
      title: pageTitle,
      // Every page gets a level-one heading, even when its Markdown starts lower.
      bodyHtml: title === null ? `<h1>${escapeHtml(pageTitle)}</h1>\n${html}` : html,
      sourceLabel: toPosix(relative(repoRoot, page.sourcePath)),
    });
  }

  const topPages = pages.filter((page) => page.sectionId === null);
  const navSections = sections.map((section) => {
    const outPath = `${section.id}/index.html`;
    const sectionPages = pages.filter((p) => p.sectionId === section.id && !p.isSectionIntro);
    let intro = pages.find((p) => p.sectionId === section.id && p.isSectionIntro);
    if (!intro) {
      const bodyHtml = `<h1>${escapeHtml(section.title)}</h1>\n`;
      const { id: sectionId, title } = section;
      intro = { outPath, sectionId, isSectionIntro: true, title, bodyHtml };
      pages.push(intro);
    }
    intro.bodyHtml = (intro.bodyHtml ?? '') + renderSectionList(sectionPages, outPath);
    return { title: section.title, outPath, pages: sectionPages };
  });
  const nav = { topPages, sections: navSections };

  rmSync(siteDir, { recursive: true, force: true });
  for (const page of pages) {
    const outFile = join(siteDir, page.outPath);
    mkdirSync(dirname(outFile), { recursive: true });
    const { title = page.outPath, bodyHtml = '', sourceLabel } = page;
    const html = renderPage({ outPath: page.outPath, title, bodyHtml, nav, sourceLabel });
    writeFileSync(outFile, html);
  }
  for (const asset of assets) {
    mkdirSync(dirname(join(siteDir, asset.outPath)), { recursive: true });
    copyFileSync(asset.sourcePath, join(siteDir, asset.outPath));
  }
  mkdirSync(dirname(join(siteDir, stylesheetPath)), { recursive: true });
  copyFileSync(join(webDocsDir, 'lib', 'site.css'), join(siteDir, stylesheetPath));

  return { siteDir, pagePaths: pages.map((page) => page.outPath).sort(), brokenLinks };
}
