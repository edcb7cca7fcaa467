// Vite build for the reference app. PGlite and agent-kit stay external to the server bundle:
// bundled, PGlite cannot find its WASM and data files and its rejection kills the server.
import { sveltekit } from '@sveltejs/kit/vite';
import { defineConfig } from 'vite';

// Resolved from node_modules at run time, never inlined. agent-kit is a linked workspace
// package, which Vite would otherwise inline (and with it, its own PGlite import).
const serverExternals = ['@electric-sql/pglite', 'agent-kit'];

export default defineConfig({
  plugins: [sveltekit()],
  ssr: { external: serverExternals },
  // Pre-bundling PGlite for the dev server breaks its asset URLs, so dev serves it as is.
  optimizeDeps: { exclude: serverExternals },
});
