// The one HTML template every docs page shares: head, sidebar navigation and content column.
// All URLs it writes are relative, so the site works from any base path and from file://.
import { posix } from 'node:path';
import { escapeHtml } from './render-markdown.js';

/** @typedef {{ title?: string, navTitle?: string, outPath: string }} NavLink */
/** @typedef {{ topPages: NavLink[], sections: (NavLink & { pages: NavLink[] })[] }} Nav */

export const siteTitle = 'agent-kit docs';
export const stylesheetPath = 'assets/site.css';

/**
 * A relative URL from the page at `fromOutPath` to `toOutPath` (both relative to site/).
 * @param {string} fromOutPath
 * @param {string} toOutPath
 */
export function relativeHref(fromOutPath, toOutPath) {
  const href = posix.relative(posix.dirname(fromOutPath), toOutPath);
  return href === '' ? posix.basename(toOutPath) : href;
}

/**
 * @param {string} currentOutPath
 * @param {NavLink} link
 */
function renderNavLink(currentOutPath, { title, navTitle, outPath }) {
  const current = outPath === currentOutPath ? ' aria-current="page"' : '';
  const href = escapeHtml(relativeHref(currentOutPath, outPath));
  return `<li><a href="${href}"${current}>${escapeHtml(navTitle ?? title ?? outPath)}</a></li>`;
}

/**
 * The sidebar: the top-level pages, then each section's heading (linking to its index page)
 * over its pages.
 * @param {string} currentOutPath
 * @param {Nav} nav
 */
export function renderSidebar(currentOutPath, nav) {
  const parts = [
    `<a class="site-title" href="${relativeHref(currentOutPath, 'index.html')}">${siteTitle}</a>`,
    `<ul>${nav.topPages.map((link) => renderNavLink(currentOutPath, link)).join('')}</ul>`,
  ];
  for (const section of nav.sections) {
    const href = escapeHtml(relativeHref(currentOutPath, section.outPath));
    const current = section.outPath === currentOutPath ? ' aria-current="page"' : '';
    const title = escapeHtml(section.title ?? section.outPath);
    parts.push(`<h2><a href="${href}"${current}>${title}</a></h2>`);
    const links = section.pages.map((link) => renderNavLink(currentOutPath, link));
    if (links.length > 0) parts.push(`<ul>${links.join('')}</ul>`);
  }
  return `<nav class="sidebar" aria-label="Documentation">\n${parts.join('\n')}\n</nav>`;
}

/**
 * A complete HTML document for one page. `sourceLabel` names the file to edit, if any.
 * @param {{ outPath: string, title: string, bodyHtml: string, nav: Nav,
 *   sourceLabel?: string }} page
 */
export function renderPage({ outPath, title, bodyHtml, nav, sourceLabel }) {
  const stylesheet = relativeHref(outPath, stylesheetPath);
  const footer = sourceLabel
    ? `<footer class="source">Source: <code>${escapeHtml(sourceLabel)}</code></footer>`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · ${siteTitle}</title>
<link rel="stylesheet" href="${escapeHtml(stylesheet)}">
</head>
<body>
${renderSidebar(outPath, nav)}
<main>
${bodyHtml}
${footer}
</main>
</body>
</html>
`;
}
