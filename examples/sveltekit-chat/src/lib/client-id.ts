// Client message ids: a retried POST /api/chat with the same id never creates a second turn.
// crypto.randomUUID exists only in secure contexts (https, localhost), so plain-http LAN access
// falls back to getRandomValues, which exists everywhere.

/** A random id for one user message. */
export function newClientMessageId(): string {
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}
