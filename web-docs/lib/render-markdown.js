// Markdown to HTML for one page: GitHub-style heading ids (so links written for GitHub keep
// their anchors), and every link passed through the caller's resolver before rendering.
import { Marked } from 'marked';

/**
 * Decides what a link becomes: `{ href }` rewrites it, `{ repoPath }` marks a repository file
 * the site does not contain, null keeps it as written.
 * @typedef {(href: string) => { href: string } | { repoPath: string } | null} LinkResolver
 */

/**
 * Escapes text for use in HTML content and attribute values.
 * @param {string} text
 */
export function escapeHtml(text) {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

/** @param {string} text */
function unescapeHtml(text) {
  return text
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&quot;', '"')
    .replaceAll('&#39;', "'")
    .replaceAll('&amp;', '&');
}

/**
 * Returns a function that slugs heading text the way GitHub does: lower case, punctuation
 * dropped, spaces to hyphens, and `-1`, `-2`, … appended to repeats within one page.
 */
export function createSlugger() {
  /** @type {Map<string, number>} */
  const occurrences = new Map();
  /** @param {string} text */
  return (text) => {
    const base = text
      .toLowerCase()
      .trim()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
      .replaceAll(' ', '-');
    let slug = base;
    while (occurrences.has(slug)) {
      const count = (occurrences.get(base) ?? 0) + 1;
      occurrences.set(base, count);
      slug = `${base}-${count}`;
    }
    occurrences.set(slug, 0);
    return slug;
  };
}

/**
 * The text of inline tokens without markup (for heading ids and titles). Walks the tokens itself:
 * marked's TextRenderer has no parser of its own for nested emphasis.
 * @param {Array<{ tokens?: unknown[], text?: string, raw?: string }>} tokens
 * @returns {string}
 */
function plainText(tokens) {
  return tokens
    .map((t) => (Array.isArray(t.tokens) ? plainText(/** @type {any} */ (t.tokens)) : (t.text ?? t.raw ?? '')))
    .join('');
}

/**
 * Renders `markdown` to HTML, passing every link and image through `resolveLink`. Returns the
 * HTML and the text of the first level-one heading (null when there is none).
 * @param {string} markdown
 * @param {{ resolveLink: LinkResolver }} options
 * @returns {{ html: string, title: string | null }}
 */
export function renderMarkdown(markdown, { resolveLink }) {
  const slug = createSlugger();
  /** @type {string | null} */
  let title = null;
  /** @type {WeakMap<object, string>} Links that name a repository file outside the site. */
  const repoPathByToken = new WeakMap();
  const marked = new Marked({
    gfm: true,
    walkTokens(token) {
      if (token.type !== 'link' && token.type !== 'image') return;
      const resolved = resolveLink(token.href);
      if (resolved === null) return;
      if ('href' in resolved) token.href = resolved.href;
      else repoPathByToken.set(token, resolved.repoPath);
    },
    renderer: {
      heading(token) {
        const inner = this.parser.parseInline(token.tokens);
        const plain = unescapeHtml(plainText(token.tokens));
        const id = slug(plain);
        if (token.depth === 1) {
          title ??= plain;
          return `<h1 id="${id}">${inner}</h1>\n`;
        }
        const anchor = `<a class="anchor" href="#${id}" aria-label="Link to this section">#</a>`;
        return `<h${token.depth} id="${id}">${inner} ${anchor}</h${token.depth}>\n`;
      },
      link(token) {
        const repoPath = repoPathByToken.get(token);
        if (repoPath === undefined) return false; // the default rendering
        const inner = this.parser.parseInline(token.tokens);
        const where = escapeHtml(`In the repository: ${repoPath}`);
        return `<span class="repo-ref" title="${where}">${inner}</span>`;
      },
    },
  });
  const html = marked.parse(markdown, { async: false });
  return { html, title };
}
