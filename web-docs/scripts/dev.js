// `npm --prefix web-docs run dev`: generates the site, then serves web-docs/site on
// 127.0.0.1 (PORT, default 4000) until interrupted. Rerun it to pick up edits.
import { generateSite } from '../lib/generate-site.js';
import { serveSite } from '../lib/serve-site.js';

const { siteDir, pagePaths, brokenLinks } = generateSite();
for (const { page, href } of brokenLinks) {
  console.error(`web-docs: broken link in ${page}: ${href}`);
}
const port = Number(process.env.PORT ?? 4000);
const { url, close } = await serveSite({ root: siteDir, port, host: '127.0.0.1' });
console.log(`web-docs: serving ${pagePaths.length} pages at ${url}/ (Ctrl-C to stop)`);

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    close().then(() => process.exit(0));
  });
}
