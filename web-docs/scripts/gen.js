// `npm --prefix web-docs run gen`: regenerates pages/adr/ and the static site in site/.
// Exits non-zero when a page links to a file that does not exist.
import { relative } from 'node:path';
import { generateSite } from '../lib/generate-site.js';

const { siteDir, pagePaths, brokenLinks } = generateSite();
const shownSiteDir = relative(process.cwd(), siteDir) || '.';
console.log(`web-docs: wrote ${pagePaths.length} pages to ${shownSiteDir}`);
for (const { page, href } of brokenLinks) {
  console.error(`web-docs: broken link in ${page}: ${href}`);
}
if (brokenLinks.length > 0) process.exitCode = 1;
