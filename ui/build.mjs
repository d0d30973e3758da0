// Bundles the editor island and the pages' script (ui/src) into static/dist, which the
// Go binary embeds (and serves under names carrying a hash of their content).
// Usage: node ui/build.mjs [--watch] [--sourcemap]
// Source maps are written only with --sourcemap (make run) or --watch: a release binary
// embeds none.
import * as esbuild from "esbuild";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const watch = process.argv.includes("--watch");
const sourcemap = watch || process.argv.includes("--sourcemap");
const outdir = "static/dist";

// Start from an empty dist (but its .gitkeep): a stale map must not end up in the binary.
for (const f of readdirSync(outdir)) if (f !== ".gitkeep") rmSync(join(outdir, f), { recursive: true, force: true });

const options = {
  entryPoints: { editor: "ui/src/main.tsx", pages: "ui/src/pages/main.ts" },
  outdir,
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: !watch,
  sourcemap: sourcemap ? "linked" : false,
  jsx: "automatic",
  loader: { ".css": "css" },
  define: { "process.env.NODE_ENV": watch ? '"development"' : '"production"' },
  logLevel: "info",
};

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
