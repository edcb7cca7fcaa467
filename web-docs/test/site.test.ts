// The real docs site: runs the generator on the repository's docs, checks every internal link
// and anchor in every page, then serves the site and opens each page in headless Chromium.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPaths, generateSite } from '../lib/generate-site.js';
import { sections } from '../lib/doc-sources.js';
import { serveSite } from '../lib/serve-site.js';
import { findBrokenLinks } from './find-broken-links.js';

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const hasChromium = existsSync(chromiumPath);
// In CI a missing browser must fail, or the suite would pass having opened nothing.
if (!hasChromium && process.env.CI === 'true') {
  throw new Error(
    `Chromium is missing at ${chromiumPath} but CI=true: install it (apt-get install -y chromium).`,
  );
}
const skipReason = `no Chromium at ${chromiumPath}; apt-get install -y chromium`;
if (!hasChromium) console.warn(`site.test.ts browser checks skipped: ${skipReason}`);

const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let generated: ReturnType<typeof generateSite>;

beforeAll(() => {
  generated = generateSite();
});

describe('the generated docs site', () => {
  it('has no broken internal link or anchor in any page', () => {
    const broken = findBrokenLinks(generated.siteDir);
    expect(broken, `broken links:\n${broken.join('\n')}`).toEqual([]);
    expect(generated.brokenLinks, 'links the generator could not resolve').toEqual([]);
  });

  it('has the home page and an index page for every section', () => {
    expect(generated.pagePaths).toContain('index.html');
    for (const section of sections) {
      expect(generated.pagePaths).toContain(`${section.id}/index.html`);
    }
  });

  it('copies each ADR into pages/adr with the do-not-edit banner first', () => {
    const adrPages = generated.pagePaths.filter(
      (path) => path.startsWith('adr/') && path !== 'adr/index.html',
    );
    expect(adrPages.length).toBeGreaterThan(0);
    for (const page of adrPages) {
      const name = page.slice('adr/'.length).replace(/\.html$/, '.md');
      const copy = readFileSync(join(defaultPaths.pagesDir, 'adr', name), 'utf8');
      expect(copy.split('\n')[0]).toBe(
        `> Copied from docs/adr/${name} by \`npm --prefix web-docs run gen\` — edit the original.`,
      );
    }
  });
});

const browserSuiteName = `every page in Chromium${hasChromium ? '' : ` (skipped: ${skipReason})`}`;

describe.skipIf(!hasChromium)(browserSuiteName, () => {
  let browser: Browser | undefined;
  let site: Awaited<ReturnType<typeof serveSite>> | undefined;

  beforeAll(async () => {
    site = await serveSite({ root: generated.siteDir, port: 0 });
    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
  });

  afterAll(async () => {
    await browser?.close();
    await site?.close();
  });

  it('serves each page with status 200, a non-empty <h1> and no failed request', async () => {
    const page = await browser!.newPage();
    const failures: string[] = [];
    page.on('requestfailed', (request) => failures.push(`${request.url()} failed`));
    page.on('response', (response) => {
      if (response.status() >= 400) failures.push(`${response.url()} → ${response.status()}`);
    });
    for (const pagePath of generated.pagePaths) {
      const response = await page.goto(`${site!.url}/${pagePath}`);
      expect(response?.status(), pagePath).toBe(200);
      const heading = (await page.locator('h1').first().textContent()) ?? '';
      expect(heading.trim(), `<h1> of ${pagePath}`).not.toBe('');
    }
    await page.close();
    expect(failures).toEqual([]);
  });
});
