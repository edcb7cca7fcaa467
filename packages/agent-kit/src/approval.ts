// The rule for an approval answered by typing, in a module of its own with no imports, so the
// browser (`agent-kit/client`) and the engine (`turn/tool-calls.ts`) read one copy of it.

/**
 * Whether a typed reply approves the tool call a run waits on: only when it is nothing but a
 * yes, one of these words in any case, with at most a trailing "." or "!". "ok, hold on — do NOT
 * send it" starts with a yes and is a no, and so is every other reply ("sure" included). A page
 * can call this on its draft to say, before it is sent, that it will deny.
 */
export function isApproval(text: string): boolean {
  return /^(y|yes|ok|approve|approved)[.!]?$/i.test(text.trim());
}
