// The rule for a blank message or answer, in a module of its own with no imports, so the browser
// (`agent-kit/client`), the routes and the engine read one copy of it.

/**
 * White space, and the characters that show nothing: soft hyphen, Arabic letter mark, Mongolian
 * vowel separator, zero-width space and joiners, direction marks and embeddings, word joiner and
 * invisible operators, direction isolates, byte order mark, Hangul fillers, braille blank. (Not
 * all of Unicode's Cf: U+0600–0605 and U+06DD are visible marks.)
 */
const invisible = /^[\s\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\u2800\u3164\ufeff\uffa0]*$/;

/**
 * Nothing a reader would see: white space and invisible characters only. The library refuses
 * such a message or answer (a 400 from the routes); a page can call this on its draft to keep
 * Send disabled for the same texts.
 */
export function isBlank(text: string): boolean {
  return invisible.test(text);
}
