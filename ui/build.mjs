// Bundles the editor island and the pages' script (ui/src) into static/dist, which the
// Go binary embeds. Usage: node ui/build.mjs [--watch]
import * as esbuild from "esbuild";

const watch = process.argv.includes("--watch");
const options = {
  entryPoints: { editor: "ui/src/main.tsx", pages: "ui/src/pages/main.ts" },
  outdir: "static/dist",
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: !watch,
  sourcemap: true,
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
