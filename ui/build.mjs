// Bundles the editor (ui/src) into static/dist, which the Go binary embeds.
// Usage: node ui/build.mjs [--watch]
import * as esbuild from "esbuild";

const options = {
  entryPoints: { editor: "ui/src/main.tsx" },
  outdir: "static/dist",
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: !process.argv.includes("--watch"),
  sourcemap: true,
  jsx: "automatic",
  loader: { ".css": "css" },
  define: { "process.env.NODE_ENV": process.argv.includes("--watch") ? '"development"' : '"production"' },
  logLevel: "info",
};

if (process.argv.includes("--watch")) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
