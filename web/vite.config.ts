import { defineConfig } from "vite"

// The dashboard is served by the gateway under /dashboard/ (src/management/dashboard/Static.ts) from
// dist/web. Hashed asset names make them cacheable for a year; index.html is not cached.
export default defineConfig({
  root: __dirname,
  base: "/dashboard/",
  publicDir: false,
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  resolve: { alias: { react: "preact/compat", "react-dom": "preact/compat" } },
  build: {
    outDir: "../dist/web",
    emptyOutDir: true,
    target: "es2020",
    assetsInlineLimit: 0,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 400
  }
})
