import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The dashboard's build: web/ in, web/dist out (served by src/dashboard/dashboard-routes.ts). Nothing
// inline and nothing remote: the page's Content-Security-Policy allows scripts and styles from the
// origin only, and the dashboard must work with no network beyond Mailroom itself.
export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The preload polyfill would be fine (it is bundled, not inline), but every browser we support has modulepreload.
    modulePreload: { polyfill: false },
    // Small files stay files: a data: URL for a script or style would be refused by the policy.
    assetsInlineLimit: 0,
    sourcemap: false,
  },
});
