// Hide a page in a browser test, or show it again, as the browser does when its tab goes behind
// another or its window is minimised: `document.hidden` and `visibilityState` say so, and
// `visibilitychange` fires. (Headless Chromium shows every page; this is what a page can see of it.)
// Used by the published package's browser test and the reference app's.
import type { Page } from 'playwright-core';

export async function setHidden(page: Page, hidden: boolean): Promise<void> {
  await page.evaluate((h) => {
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => h });
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (h ? 'hidden' : 'visible') });
    document.dispatchEvent(new Event('visibilitychange'));
  }, hidden);
}
