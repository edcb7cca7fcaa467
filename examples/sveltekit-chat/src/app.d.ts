// Ambient types for SvelteKit's App namespace: `locals.user` is the signed-in user (or null),
// set in hooks.server.ts from the verified session cookie.
// See https://svelte.dev/docs/kit/types#app.d.ts
import type { SessionUser } from '$lib/server/session';

declare global {
  namespace App {
    interface Locals {
      user: SessionUser | null;
    }
    interface PageData {
      user: SessionUser | null;
    }
  }
}

export {};
