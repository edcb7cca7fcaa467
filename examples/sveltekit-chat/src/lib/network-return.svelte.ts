// When the browser says its network is back (`online`): a connection opened before, on a network
// the device has since left (a phone from Wi-Fi to cellular, a laptop waking up), may be dead
// without a word, and its stream would be taken for cut only after 35 s of silence (sse.ts). The
// chat's thread stream connects again at once instead, from the last seq it applied.

/**
 * How many times the browser said it is online again, as state, for the component that calls it
 * (during its setup): an effect that reads `returns` runs again each time.
 */
export function networkReturns(): { readonly returns: number } {
  let returns = $state(0);
  $effect(() => {
    const back = () => (returns += 1);
    window.addEventListener('online', back);
    return () => window.removeEventListener('online', back);
  });
  return {
    get returns() {
      return returns;
    },
  };
}
