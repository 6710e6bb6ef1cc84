// Builds the plotly.js bundle evalsite serves, from index.js (core + scatter, bar, heatmap),
// into static/vendor/plotly-evalsite-<first 12 hex of its sha256>.min.js with .gz and .br
// beside it and plotly.js's licence. Run with `npm ci && npm run build` in this folder.
// The same inputs (package-lock.json) give the same bytes, so the same name.
import { createHash } from "node:crypto";
import { copyFileSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const vendor = join(here, "..", "..", "static", "vendor");
const plotlyPkg = JSON.parse(readFileSync(join(here, "node_modules", "plotly.js", "package.json"), "utf8"));

const result = await build({
  entryPoints: [join(here, "index.js")],
  bundle: true,
  minify: true,
  format: "iife",
  globalName: "Plotly",
  target: "es2016",
  write: false,
  legalComments: "none",
  // As plotly.js's own esbuild-config.js: browser globals, no AMD.
  define: { global: "window", "define.amd": "false", "process.env.NODE_DEBUG": "false" },
  alias: { stream: "stream-browserify" },
  // Only map traces import CSS (maplibre's); none is registered here.
  loader: { ".css": "empty" },
  banner: {
    js: [
      "/**",
      `* plotly.js (evalsite: scatter, bar, heatmap - minified) v${plotlyPkg.version}`,
      "* Copyright 2012-2026, Plotly, Inc.",
      "* All rights reserved.",
      "* Licensed under the MIT license (plotly.js-LICENSE.txt)",
      "*/",
    ].join("\n"),
  },
  logLevel: "warning",
});

const code = Buffer.from(result.outputFiles[0].contents);
const hash = createHash("sha256").update(code).digest("hex").slice(0, 12);
const name = `plotly-evalsite-${hash}.min.js`;

for (const old of readdirSync(vendor)) {
  if (/^plotly-.*\.min\.js(\.gz|\.br)?$/.test(old)) unlinkSync(join(vendor, old));
}
writeFileSync(join(vendor, name), code);
writeFileSync(join(vendor, name + ".gz"), gzipSync(code, { level: 9, mtime: 0 }));
writeFileSync(join(vendor, name + ".br"), brotliCompressSync(code, {
  params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: code.length },
}));
copyFileSync(join(here, "node_modules", "plotly.js", "LICENSE"), join(vendor, "plotly.js-LICENSE.txt"));
console.log(`static/vendor/${name}: ${code.length} bytes`);
