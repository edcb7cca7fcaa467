// SvelteKit configuration for the reference chat app: a plain Node server (adapter-node),
// so the app runs with `node build/index.js` and needs no platform beyond Node and Postgres.
import adapter from '@sveltejs/adapter-node';
import { vitePreprocess } from '@sveltejs/vite-plugin-svelte';

/** @type {import('@sveltejs/kit').Config} */
const config = {
  preprocess: vitePreprocess(),
  kit: {
    adapter: adapter({ out: 'build' }),
    // The app's TypeScript scripts (the thread-open benchmark) are type-checked with the app.
    typescript: {
      config: (tsconfig) => {
        tsconfig.include.push('../scripts/**/*.ts');
      },
    },
  },
};

export default config;
