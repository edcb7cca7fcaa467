// Whether the page is in view: not a tab behind another, not a minimised window (ADR-0099). The
// chat's thread stream, the operator page's poll and its run timeline run only while it is: on a
// serverless host each open stream or poll is an invocation, and a forgotten tab would hold one
// open, reconnecting at every stream budget, for as long as it stays open. Shown again, each picks
// up where it stopped (the stream from the last seq it applied, the poll at once).

/**
 * The page's visibility as state, for the component that calls it (during its setup): `visible`
 * follows `document.hidden` through `visibilitychange`. On the server, and before the component
 * mounts, the page counts as visible.
 */
export function pageVisibility(): { readonly visible: boolean } {
  let visible = $state(true);
  $effect(() => {
    const update = () => (visible = !document.hidden);
    update();
    document.addEventListener('visibilitychange', update);
    return () => document.removeEventListener('visibilitychange', update);
  });
  return {
    get visible() {
      return visible;
    },
  };
}
