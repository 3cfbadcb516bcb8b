#!/usr/bin/env node
// Bundles the compiled CLI (dist/cli/main.js) into dist/bundle/: one entry file and chunks for
// what is imported lazily (each command's implementation, the server). A CLI start is mostly
// module loading: ~650 small ESM files cost Node about a second before the first line; the
// bundle is a few files and starts in about a third of that (docs/performance.md, "CLI start-up").
// bin/gateway runs the bundle when it is there and dist/cli/main.js otherwise.
// Part of `npm run build`, after tsc.
import * as esbuild from "esbuild"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { rewriteChunk } from "./spread-rewrite.mjs"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const outdir = path.join(root, "dist/bundle")
rmSync(outdir, { recursive: true, force: true })

const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: { gateway: "dist/cli/main.js" },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  outExtension: { ".js": ".mjs" },
  chunkNames: "chunk-[hash]",
  // Stay in node_modules, loaded by Node itself: native addons (better-sqlite3, the token
  // tunnel's @ngrok/ngrok and the TLS fingerprint's impit, each with its per-platform binary
  // package), and the
  // OpenTelemetry packages, CommonJS modules the gateway imports dynamically (only when tracing
  // or /metrics is used): a bundled chunk of a CommonJS module exports only `default`, so their
  // named exports (resourceFromAttributes, ...) would be missing.
  external: ["better-sqlite3", "@opentelemetry/*", "@ngrok/*", "impit", "impit-*"],
  // CommonJS dependencies bundled into ES modules still call require() for Node's built-ins.
  banner: { js: 'import { createRequire as __gatewayRequire } from "node:module"; const require = __gatewayRequire(import.meta.url);' },
  legalComments: "none",
  logLevel: "warning",
  metafile: true
})
// `{ ...base, key }` literals become Object.assign calls: V8 keeps what such a literal makes
// alive through scavenges (scripts/spread-rewrite.mjs, docs/performance.md "The latency tail").
// A script with one character above U+00FF is kept by V8 as two-byte source: twice its size
// in memory (about 4 MB at start for the few chunks whose comments or regexes have a `’`, `≥`
// or `█`, docs/performance.md "Memory at rest"). Those characters are written as \uXXXX escapes, which
// mean the same in strings, regexes and identifiers and nothing in comments; only a String.raw
// template would read the escape literally, so a chunk with both stops the build.
const WIDE = /[^\u0000-\u00ff]/g
const escapeWide = (code, file) => {
  if (code.search(WIDE) === -1) return code
  if (code.includes("String.raw`"))
    throw new Error(`bundle-cli: ${file} has String.raw and characters above U+00FF; escape them in the source`)
  return code.replace(WIDE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
}
let rewritten = 0
for (const file of Object.keys(result.metafile.outputs)) {
  if (!file.endsWith(".mjs")) continue
  const at = path.join(root, file)
  const before = readFileSync(at, "utf8")
  const r = rewriteChunk(before)
  rewritten += r.count
  const code = escapeWide(r.code, file)
  if (code !== before) writeFileSync(at, code)
}
if (rewritten === 0) throw new Error("bundle-cli: no spread literal was rewritten; scripts/spread-rewrite.mjs no longer matches the bundle")

// Which source modules each output file holds: what test/cli-contract.test.ts reads to tell that
// a light command loads no server code, and what to look at when a chunk grows.
const outputs = Object.fromEntries(
  Object.entries(result.metafile.outputs).map(([file, o]) => [path.relative(outdir, path.join(root, file)), Object.keys(o.inputs)])
)
writeFileSync(path.join(outdir, "modules.json"), JSON.stringify(outputs))
