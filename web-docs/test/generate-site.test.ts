// The generator on a small fixture repository made in a temp folder: ADR copies, link and
// anchor rewriting, repository references, assets, section indexes, and the static server.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSite } from '../lib/generate-site.js';
import { createSlugger, renderMarkdown } from '../lib/render-markdown.js';
import { serveSite } from '../lib/serve-site.js';
import { findBrokenLinks } from './find-broken-links.js';

const fixture: Record<string, string> = {
  'ARCHITECTURE.md': '# Architecture\n\n## Glossary\n\nA *run* executes a turn.\n',
  'packages/lib/src/lease.ts': 'export const leaseTtlMs = 30_000;\n',
  'docs/adr/0001-use-leases.md': [
    '# ADR-0001: Use leases',
    '',
    'See [deploying](../guides/deploy.md#run-it), the [glossary](../../ARCHITECTURE.md#glossary),',
    'the [code](../../packages/lib/src/lease.ts), [all guides](../guides/),',
    'a [missing page](./missing.md) and [context](#context).',
    '',
    '## Context',
    '',
  ].join('\n'),
  'docs/guides/deploy.md':
    '# Deploy\n\n## Run it\n\nAnd [a bad anchor](../adr/0001-use-leases.md#nope).\n',
  'docs/concepts/leases.md': '## Leases\n\n![diagram](diagram.svg) [reference](../reference/)\n',
  'docs/concepts/diagram.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>\n',
  'web-docs/pages/index.md': '# Home\n\n[Guides](guides/index.md)\n\n<!-- gen:root-pages -->\n',
  // A copy whose ADR no longer exists: generation must remove it.
  'web-docs/pages/adr/9999-removed.md': '# Removed\n',
};

let repoRoot = '';
let siteDir = '';
let result: ReturnType<typeof generateSite>;
const read = (path: string) => readFileSync(join(siteDir, path), 'utf8');

beforeAll(() => {
  repoRoot = mkdtempSync(join(tmpdir(), 'web-docs-fixture-'));
  for (const [path, text] of Object.entries(fixture)) {
    mkdirSync(dirname(join(repoRoot, path)), { recursive: true });
    writeFileSync(join(repoRoot, path), text);
  }
  siteDir = join(repoRoot, 'web-docs', 'site');
  result = generateSite({ repoRoot, pagesDir: join(repoRoot, 'web-docs', 'pages'), siteDir });
});

afterAll(() => {
  rmSync(repoRoot, { recursive: true, force: true });
});

describe('generateSite', () => {
  it('replaces pages/adr with banner-led copies of docs/adr', () => {
    const copyDir = join(repoRoot, 'web-docs', 'pages', 'adr');
    expect(existsSync(join(copyDir, '9999-removed.md'))).toBe(false);
    const copy = readFileSync(join(copyDir, '0001-use-leases.md'), 'utf8');
    expect(copy.split('\n')[0]).toBe(
      '> Copied from docs/adr/0001-use-leases.md by `npm --prefix web-docs run gen`'
        + ' — edit the original.',
    );
  });

  it('rewrites .md links, anchors and section folders to the generated pages', () => {
    const adr = read('adr/0001-use-leases.html');
    expect(adr).toContain('href="../guides/deploy.html#run-it"');
    expect(adr).toContain('href="../architecture.html#glossary"');
    expect(adr).toContain('href="../guides/index.html"');
    expect(adr).toContain('href="#context"');
    expect(read('concepts/leases.html')).toContain('href="../reference/index.html"');
  });

  it('shows links to repository files outside the site as references, not dead links', () => {
    expect(read('adr/0001-use-leases.html')).toContain(
      '<span class="repo-ref" title="In the repository: packages/lib/src/lease.ts">code</span>',
    );
  });

  it('reports links to missing files and keeps them visible to the site check', () => {
    expect(result.brokenLinks).toEqual([
      { page: 'adr/0001-use-leases.html', href: './missing.md' },
    ]);
    expect(findBrokenLinks(siteDir)).toEqual([
      'adr/0001-use-leases.html: ./missing.html (no such file)',
      'guides/deploy.html: ../adr/0001-use-leases.html#nope (no element with id "nope")',
    ]);
  });

  it('copies assets, adds a missing level-one heading, and lists root documents', () => {
    expect(existsSync(join(siteDir, 'concepts', 'diagram.svg'))).toBe(true);
    expect(read('concepts/leases.html')).toContain('<h1>Leases</h1>');
    expect(read('concepts/leases.html')).toContain('src="diagram.svg"');
    expect(read('index.html')).toContain('<a href="architecture.html">Architecture</a>');
    expect(read('reference/index.html')).toContain('No pages in this section yet.');
    expect(read('guides/index.html')).toContain('<a href="deploy.html">Deploy</a>');
  });

  it('links to a source browser instead when given a base URL', () => {
    const otherSite = join(repoRoot, 'site-with-source-links');
    generateSite({
      repoRoot,
      pagesDir: join(repoRoot, 'web-docs', 'pages'),
      siteDir: otherSite,
      sourceBaseUrl: 'https://example.test/blob/main/',
    });
    expect(readFileSync(join(otherSite, 'adr', '0001-use-leases.html'), 'utf8')).toContain(
      'href="https://example.test/blob/main/packages/lib/src/lease.ts"',
    );
  });
});

describe('renderMarkdown headings', () => {
  it('renders emphasis and code inside a heading and slugs its plain text', () => {
    const { html } = renderMarkdown('## Why *not* `LISTEN`?\n', { resolveLink: () => null });
    expect(html).toContain('<h2 id="why-not-listen">Why <em>not</em> <code>LISTEN</code>?');
  });
});

describe('createSlugger', () => {
  it('slugs like GitHub and numbers repeated headings', () => {
    const slug = createSlugger();
    expect(slug('Run `claim` & renew!')).toBe('run-claim--renew');
    expect(slug('Context')).toBe('context');
    expect(slug('Context')).toBe('context-1');
    expect(slug('Context')).toBe('context-2');
  });
});

describe('serveSite', () => {
  /** A raw GET, so the path reaches the server exactly as written (fetch normalises `..`). */
  function rawGet(url: string, path: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request(`${url}${path}`, { path }, (response) => {
        let body = '';
        response.on('data', (chunk) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('serves pages and folder indexes, and nothing outside the site folder', async () => {
    const site = await serveSite({ root: siteDir, port: 0 });
    try {
      expect((await rawGet(site.url, '/')).body).toContain('<h1 id="home">Home</h1>');
      expect((await rawGet(site.url, '/guides/')).status).toBe(200);
      expect((await rawGet(site.url, '/missing.html')).status).toBe(404);
      expect((await rawGet(site.url, '/%2e%2e/ARCHITECTURE.md')).status).toBe(404);
      expect((await rawGet(site.url, '/../../ARCHITECTURE.md')).status).toBe(404);
    } finally {
      await site.close();
    }
  });
});
