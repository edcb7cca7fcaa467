// Link checker for a generated site: every local href/src in every HTML page must name an
// existing file, and a #fragment must name an element id in that file.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const attributePattern = /\s(href|src)\s*=\s*("([^"]*)"|'([^']*)')/gi;
const idPattern = /\sid\s*=\s*("([^"]*)"|'([^']*)')/gi;

function decodeEntities(text: string): string {
  return text
    .replaceAll('&quot;', '"')
    .replaceAll('&#39;', "'")
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&amp;', '&');
}

/** Every file under `dir` whose name ends in `.html`. */
export function listHtmlFiles(dir: string): string[] {
  const files: string[] = [];
  const walk = (current: string) => {
    for (const name of readdirSync(current)) {
      const path = join(current, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.html')) files.push(path);
    }
  };
  walk(dir);
  return files.sort();
}

/** The element ids in an HTML document. */
export function collectIds(html: string): Set<string> {
  const ids = new Set<string>();
  for (const match of html.matchAll(idPattern)) ids.add(decodeEntities(match[2] ?? match[3]));
  return ids;
}

/** The local link targets (href and src) in an HTML document, external URLs left out. */
export function collectLocalLinks(html: string): string[] {
  const links: string[] = [];
  for (const match of html.matchAll(attributePattern)) {
    const value = decodeEntities(match[3] ?? match[4]).trim();
    if (value === '' || value.startsWith('//') || /^[a-z][a-z0-9+.-]*:/i.test(value)) continue;
    links.push(value);
  }
  return links;
}

/**
 * Checks every local link of every page under `siteDir`. Returns one line per broken link,
 * `page.html: href (reason)`, sorted; empty when all resolve.
 */
export function findBrokenLinks(siteDir: string): string[] {
  const root = resolve(siteDir);
  const idsByFile = new Map<string, Set<string>>();
  const idsOf = (file: string) => {
    if (!idsByFile.has(file)) idsByFile.set(file, collectIds(readFileSync(file, 'utf8')));
    return idsByFile.get(file)!;
  };
  const broken: string[] = [];
  for (const page of listHtmlFiles(root)) {
    const pageName = relative(root, page).split(sep).join('/');
    for (const link of collectLocalLinks(readFileSync(page, 'utf8'))) {
      const hashAt = link.indexOf('#');
      const pathPart = (hashAt === -1 ? link : link.slice(0, hashAt)).replace(/\?.*$/, '');
      const fragment = hashAt === -1 ? '' : decodeURIComponent(link.slice(hashAt + 1));
      let target = pathPart === '' ? page : resolve(dirname(page), decodeURIComponent(pathPart));
      if (pathPart.startsWith('/')) target = join(root, decodeURIComponent(pathPart));
      if (existsSync(target) && statSync(target).isDirectory()) target = join(target, 'index.html');
      if (target !== root && !target.startsWith(root + sep)) {
        broken.push(`${pageName}: ${link} (outside the site)`);
      } else if (!existsSync(target)) {
        broken.push(`${pageName}: ${link} (no such file)`);
      } else if (fragment !== '' && target.endsWith('.html') && !idsOf(target).has(fragment)) {
        broken.push(`${pageName}: ${link} (no element with id "${fragment}")`);
      }
    }
  }
  return broken.sort();
}
