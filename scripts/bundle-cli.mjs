#!/usr/bin/env node
// Bundles the compiled CLI (dist/cli/main.js) into dist/bundle/: one entry file and chunks for
// what is imported lazily (each command's implementation, the server). A CLI start is mostly
// module loading: ~650 small ESM files cost Node about a second before the first line; the
// bundle is a few files and starts in about a third of that (docs/performance.md, "CLI start-up").
// bin/gateway runs the bundle when it is there and dist/cli/main.js otherwise.
//
// `gateway` alone (the server, as a service or a container starts it) also has a CommonJS copy,
// serve.cjs, run from a V8 code cache made here: Node 20 compiles every ES module from its source
// on each start (its compile cache is Node 22's), and compiling was about a fifth of a start's CPU
// (docs/performance.md, "Server start-up"). dist/bundle/gateway.mjs picks one (LOADER below).
// Part of `npm run build`, after tsc.
import * as esbuild from "esbuild"
import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import http from "node:http"
import net from "node:net"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"
import { rewriteChunk } from "./spread-rewrite.mjs"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const outdir = path.join(root, "dist/bundle")
rmSync(outdir, { recursive: true, force: true })

// Stay in node_modules, loaded by Node itself: native addons (better-sqlite3, the token
// tunnel's @ngrok/ngrok and the TLS fingerprint's impit, each with its per-platform binary
// package), and the
// OpenTelemetry packages, CommonJS modules the gateway imports dynamically (only when tracing
// or /metrics is used): a bundled chunk of a CommonJS module exports only `default`, so their
// named exports (resourceFromAttributes, ...) would be missing.
const external = ["better-sqlite3", "@opentelemetry/*", "@ngrok/*", "impit", "impit-*"]

// The CLI's entry is cli.mjs; gateway.mjs, the file bin/gateway runs, is the LOADER below.
const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: { cli: "dist/cli/main.js" },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  outExtension: { ".js": ".mjs" },
  chunkNames: "chunk-[hash]",
  external,
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
// template would read the escape literally, so one with such a character stops the build.
const WIDE = /[^\u0000-\u00ff]/g
const escapeAll = (code) => code.replace(WIDE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
const escapeWide = (code, file) => {
  if (code.search(WIDE) === -1) return code
  if (!code.includes("String.raw`")) return escapeAll(code)
  // serve.cjs holds every module, String.raw templates too: the code around them is escaped.
  const raw = []
  const sourceFile = ts.createSourceFile(file, code, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS)
  const visit = (node) => {
    if (ts.isTaggedTemplateExpression(node) && node.tag.getText(sourceFile) === "String.raw")
      raw.push([node.getStart(sourceFile), node.end])
    else ts.forEachChild(node, visit)
  }
  visit(sourceFile)
  let out = ""
  let at = 0
  for (const [start, end] of raw) {
    const template = code.slice(start, end)
    if (template.search(WIDE) !== -1)
      throw new Error(`bundle-cli: ${file} has a String.raw template with characters above U+00FF; escape them in the source`)
    out += escapeAll(code.slice(at, start)) + template
    at = end
  }
  return out + escapeAll(code.slice(at))
}
/** Rewrites the spread literals and escapes the wide characters of each output file; answers how many literals were. */
const finish = (files) => {
  let rewritten = 0
  for (const file of files) {
    const at = path.join(root, file)
    const before = readFileSync(at, "utf8")
    const r = rewriteChunk(before)
    rewritten += r.count
    const code = escapeWide(r.code, file)
    if (code !== before) writeFileSync(at, code)
  }
  if (rewritten === 0)
    throw new Error("bundle-cli: no spread literal was rewritten; scripts/spread-rewrite.mjs no longer matches the bundle")
}
finish(Object.keys(result.metafile.outputs).filter((file) => file.endsWith(".mjs")))

// Which source modules each output file holds: what test/cli-contract.test.ts reads to tell that
// a light command loads no server code, and what to look at when a chunk grows.
const outputs = Object.fromEntries(
  Object.entries(result.metafile.outputs).map(([file, o]) => [path.relative(outdir, path.join(root, file)), Object.keys(o.inputs)])
)

// ---------------------------------------------------------------- the server's code cache

// The server as one CommonJS file: V8 takes a code cache for a script (vm.Script's cachedData),
// never for an ES module in Node 20. esbuild splits only ES modules, so this file holds all that
// the server may import; what it imports lazily stays lazy (evaluated on first import), only its
// source is kept (V8 holds a script's source: the file's size is memory at rest). So that it
// stays small, the command tree (which `gateway` alone never loads, src/cli/main.ts) is left out,
// and the packages (direct dependencies, CommonJS builds) that only a feature imports, on first
// use, are loaded from node_modules then: the o200k tokenizer (4 MB), node-forge, the MCP SDK
// with zod and ajv, ioredis, socks, tar-stream, lamejs. None is loaded at start. Dynamic imports
// become require() (a script has no import() without an experimental loader; every external is
// CommonJS). Everything in an ES module is strict code: so is this file. import.meta.url is the
// file's own URL, in the same directory as the chunks.
const SERVER = "serve.cjs"
const COMMANDS_LEFT_OUT = {
  name: "commands-left-out",
  setup(build) {
    build.onResolve({ filter: /^(\.\/app\.js|@effect\/cli\/CliConfig)$/ }, (args) =>
      args.importer.endsWith(path.join("dist", "cli", "main.js")) ? { path: args.path, namespace: "commands-left-out" } : undefined
    )
    build.onLoad({ filter: /.*/, namespace: "commands-left-out" }, () => ({
      contents:
        'const leftOut = () => { throw new Error("serve.cjs runs `gateway` alone; the commands run from cli.mjs") }\nexport const cli = leftOut\nexport const layer = leftOut\n',
      loader: "js"
    }))
  }
}
/*
 * Two parts of undici that its modules require at load, that the server never uses, and whose
 * loading costs a start: the cookie helpers (getCookies, setCookie, ...: undici's index takes them,
 * and their module reads `globalThis.Headers`, which makes Node load and compile its own copy of
 * undici, the one behind the global fetch: ~30 ms) and the HTTP/2 client (client.js takes it, and it
 * loads node:http2; the gateway's upstream connections are HTTP/1.1). In serve.cjs each is a stub
 * with the same exports that loads the real module (bundled as before) on the first call. If undici
 * stops naming these paths, the stub is simply not used.
 */
const UNDICI_ON_FIRST_USE = [
  // [the importing file, the path it requires, the file that path is, the functions it exports (null: it is one function)]
  [
    "index.js",
    "./lib/web/cookies",
    "lib/web/cookies/index.js",
    ["deleteCookie", "getCookies", "getSetCookies", "setCookie", "parseCookie"]
  ],
  ["lib/dispatcher/client.js", "./client-h2.js", "lib/dispatcher/client-h2.js", null]
]
const undiciOnFirstUse = {
  name: "undici-on-first-use",
  setup(build) {
    for (const [importer, request, file, names] of UNDICI_ON_FIRST_USE) {
      const escaped = request.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")
      build.onResolve({ filter: new RegExp(`^${escaped}$`) }, (args) => {
        if (args.namespace !== "file" || !args.importer.endsWith(path.join("node_modules", "undici", importer))) return undefined
        const real = path.join(args.importer.slice(0, -importer.length), file)
        return { path: real, namespace: "undici-on-first-use", pluginData: { names } }
      })
    }
    build.onLoad({ filter: /.*/, namespace: "undici-on-first-use" }, (args) => {
      const load = `let real\nconst load = () => (real ??= require(${JSON.stringify(args.path)}))\n`
      const { names } = args.pluginData
      const exports =
        names === null
          ? "module.exports = (...args) => load()(...args)"
          : names.map((name) => `exports.${name} = (...args) => load().${name}(...args)`).join("\n")
      return { contents: load + exports, loader: "js", resolveDir: path.dirname(args.path) }
    })
  }
}
const server = await esbuild.build({
  absWorkingDir: root,
  entryPoints: ["dist/cli/main.js"],
  outfile: path.join(outdir, SERVER),
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  external: [
    ...external,
    ...[
      "gpt-tokenizer",
      "node-forge",
      "@modelcontextprotocol/sdk",
      "zod",
      "ajv",
      "ajv-formats",
      "ioredis",
      "socks",
      "tar-stream",
      "@breezystack/lamejs"
    ].flatMap((p) => [p, `${p}/*`])
  ],
  supported: { "dynamic-import": false },
  plugins: [COMMANDS_LEFT_OUT, undiciOnFirstUse],
  define: { "import.meta.url": "__gatewayModuleUrl" },
  banner: { js: '"use strict"; const __gatewayModuleUrl = require("node:url").pathToFileURL(__filename).href;' },
  legalComments: "none",
  logLevel: "warning",
  metafile: true
})
finish(Object.keys(server.metafile.outputs))
outputs[SERVER] = Object.keys(Object.values(server.metafile.outputs)[0].inputs)
const serverFile = path.join(outdir, SERVER)
// V8 keeps a script's source for as long as the script lives (it compiles functions lazily from
// it, and serve.cjs runs from a code cache that holds only what the warm-up compiled): the file's
// size is memory at rest. Its indentation, newlines and comments are a third of it (7.4 -> 5.3 MB)
// and are left out; names are kept (stack traces and Function.name read as before, and profiles
// name the same functions; the chunks, which commands run, keep esbuild's layout and its
// `// src/...` comments). After the spread rewrite and the escapes, whose output stays as it is.
const compact = await esbuild.transform(readFileSync(serverFile, "utf8"), {
  minifyWhitespace: true,
  legalComments: "none",
  charset: "ascii",
  target: "node20",
  logLevel: "warning"
})
// Written as the function Node's CommonJS loader makes of a module (module.wrap), so the loader
// compiles the file's text as read: wrapping it there made a second copy of 7 MB to flatten.
const wrapped = `(function (exports, require, module, __filename, __dirname) { ${compact.code}\n});`
writeFileSync(serverFile, wrapped)

// Which command lines only start the server (src/cli/serveArgs.ts: `gateway` alone, or with
// --port, --host, --data-dir, --no-open), as a module of its own that the loader imports: the same
// function src/cli/main.ts reads, so the two cannot disagree.
const SERVE_ARGS = "serve-args.mjs"
const serveArgsBuild = await esbuild.build({
  absWorkingDir: root,
  entryPoints: ["dist/cli/serveArgs.js"],
  outfile: path.join(outdir, SERVE_ARGS),
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  legalComments: "none",
  logLevel: "warning",
  metafile: true
})
outputs[SERVE_ARGS] = Object.keys(Object.values(serveArgsBuild.metafile.outputs)[0].inputs)

/*
 * gateway.mjs, what bin/gateway imports. A command line that only starts the server (`gateway`,
 * `gateway --port 3000`: serve-args.mjs) runs serve.cjs compiled from its code cache, made for
 * this V8 (the file name says which: another V8 rejects a cache, and compiling serve.cjs whole
 * costs more than the chunks); anything else, or no cache for this V8, runs the chunks (cli.mjs). GATEWAY_WRITE_CODE_CACHE=1 is the build's warm-up run below: it runs
 * serve.cjs and writes the cache of what it compiled when it is stopped (SIGTERM).
 *
 * V8 also rejects a cache made under other V8 flags than the process has: any flag on node's
 * command line or in NODE_OPTIONS (`--max-old-space-size=512`, the `--max-semi-space-size` of
 * docs/operations.md), or bin/gateway's own set changed (`GATEWAY_IDLE_GC_SECONDS=0` leaves its
 * growth factor out), made every start compile serve.cjs from source (~0.25 s more to the first
 * answer, measured). Such a process writes a cache of its own, named by V8's tag for its flags
 * (\`v8.cachedDataVersionTag()\`) and by SERVER_ID, OWN_CACHE_AFTER_MS after it starts, and later starts with the
 * same flags run from it. V8 does not check a cache's bytes (a damaged one crashes the process),
 * so an own cache carries a CRC-32 of them, checked before use; it is written beside serve.cjs
 * when the install is writable (a read-only one compiles at every start, as before), to a
 * temporary file of its own, flushed, then renamed (two gateways on one install may write at
 * once), at most OWN_CACHES of them.
 */
// Which serve.cjs an own cache was made from (V8 checks only the source's length): one of another
// build is never taken for this one's, whatever was copied over dist/.
const SERVER_ID = createHash("sha256").update(readFileSync(serverFile)).digest("hex").slice(0, 12)
const LOADER = `// Made by scripts/bundle-cli.mjs: runs the server from its code cache, or the CLI's chunks.
import { randomBytes } from "node:crypto"
import { closeSync, existsSync, fsyncSync, openSync, readdirSync, readFileSync, readSync, renameSync, statSync, unlinkSync, writeFileSync, writeSync } from "node:fs"
import Module from "node:module"
import path from "node:path"
import { StringDecoder } from "node:string_decoder"
import { fileURLToPath } from "node:url"
import v8 from "node:v8"
import vm from "node:vm"
import zlib from "node:zlib"
import { serveArgs } from "./${SERVE_ARGS}"

const server = new URL("./${SERVER}", import.meta.url)
const cache = new URL(\`./${SERVER}.\${process.versions.v8}.cache\`, import.meta.url)
const warmUp = process.env.GATEWAY_WRITE_CODE_CACHE === "1"
const serving = serveArgs(process.argv.slice(2)) !== undefined

/**
 * V8's optimizing compilers (TurboFan, and Maglev where this V8 runs it) are held off while the
 * server starts from its code cache, and put back when it has written its first answer
 * (src/platform/system/optimizerHold.ts) or OPTIMIZER_HOLD_MAX_MS after start, whichever comes
 * first. A start runs each module's code and each layer once, but its hot helpers (Effect's
 * runtime and Schema constructors) reach TurboFan's budget and are compiled, then thrown away: on
 * one core, ~1/8 of the time to the first answer (docs/performance.md, "2026-12-02 (afternoon)").
 * Maglev is held too: code it compiles while TurboFan is off has no budget checks and would never
 * reach TurboFan (Node 24). Not when the node command line chose a compiler or its tiering
 * (\`--turbofan\`, \`--no-opt\`, \`--maglev\`, \`--max-opt\`, \`--jitless\`...), nor for another command
 * than the server's; and not when putting them back would not give this V8 its flags again.
 */
const OPTIMIZER_HOLD_MAX_MS = 10_000
const CHOSE_TIERING =
  /^--(no-)?(opt|turbofan|maglev|always-opt|always-turbofan|always-sparkplug|jitless|lite-mode|use-osr|maglev-osr|osr-from-maglev|concurrent-recompilation)$|^--(max-opt|interrupt-budget[a-z-]*|invocation-count-for-[a-z-]+|turbo-filter|maglev-filter)(=|$)/
/** V8's tag for the flags before the hold: what putting the compilers back must give again. */
const tagWithOptimizer = v8.cachedDataVersionTag()
/** What the hold changes, learnt once below: whether Maglev was on, and whether --osr-from-maglev must be set again. */
let maglevWasOn = false
let osrFromMaglev = false
let optimizerHeld = false
const holdOptimizer = () => {
  if (maglevWasOn) v8.setFlagsFromString("--no-maglev")
  v8.setFlagsFromString("--no-turbofan")
  optimizerHeld = true
}
const putOptimizerBack = () => {
  v8.setFlagsFromString("--turbofan")
  if (maglevWasOn) v8.setFlagsFromString("--maglev")
  if (osrFromMaglev) v8.setFlagsFromString("--osr-from-maglev")
  optimizerHeld = false
}
/** Holds the compilers if they can be put back as they were: a hold and a release tried once, the tag compared. */
const tryHold = () => {
  v8.setFlagsFromString("--no-maglev")
  maglevWasOn = v8.cachedDataVersionTag() !== tagWithOptimizer
  v8.setFlagsFromString("--no-turbofan")
  putOptimizerBack()
  // V8 12 and later turn --osr-from-maglev off with TurboFan and do not turn it on again.
  if (v8.cachedDataVersionTag() !== tagWithOptimizer && Number(process.versions.v8.split(".")[0]) >= 12) {
    osrFromMaglev = true
    v8.setFlagsFromString("--osr-from-maglev")
  }
  if (v8.cachedDataVersionTag() !== tagWithOptimizer) return false
  holdOptimizer()
  return true
}
const holdsOptimizer = serving && !process.execArgv.some((a) => CHOSE_TIERING.test(a.replace(/_/g, "-"))) && tryHold()
if (holdsOptimizer) {
  const release = () => {
    if (optimizerHeld) putOptimizerBack()
  }
  globalThis[Symbol.for("gateway.releaseOptimizer")] = release
  setTimeout(release, OPTIMIZER_HOLD_MAX_MS).unref()
}

/** V8's tag for this process's flags (bin/gateway's, node's command line and the hold above) and version. */
const tag = v8.cachedDataVersionTag()
/** The cache this process writes when the build's does not fit its flags: a CRC-32 of the cache (4 bytes, little-endian), then the cache. */
const ownCache = fileURLToPath(new URL(\`./${SERVER}.\${process.versions.v8}.${SERVER_ID}.flags-\${tag}.cache\`, import.meta.url))
/** How long after start a process writes its own cache: its start compiled by then, and often a first request. */
const OWN_CACHE_AFTER_MS = 5000
/** Caches of other flag sets kept beside serve.cjs, the newest first. */
const OWN_CACHES = 4

/**
 * The file's text, read 64 KB at a time. Read whole, its 7 MB buffer is freed at once, and malloc
 * then serves every allocation below that size from memory it keeps: the server held ~10 MB more
 * at rest than the chunks (measured; nothing more with MALLOC_MMAP_THRESHOLD_ fixed). The pieces are
 * joined in V8's heap, where compiling flattens them once.
 */
const readInPieces = (file) => {
  const fd = openSync(file, "r")
  const piece = Buffer.allocUnsafe(64 * 1024)
  const decoder = new StringDecoder("utf8")
  let text = ""
  for (let n = readSync(fd, piece); n > 0; n = readSync(fd, piece)) text += decoder.write(piece.subarray(0, n))
  closeSync(fd)
  return text + decoder.end()
}

/** An own cache's bytes for V8, or undefined when it is missing, unreadable or damaged. */
const readOwnCache = () => {
  try {
    const file = readFileSync(ownCache)
    const data = file.subarray(4)
    return file.length > 4 && file.readUInt32LE(0) === zlib.crc32(data) ? data : undefined
  } catch {
    return undefined
  }
}

/**
 * \`script\`'s code cache, made under the flags the process started with (V8 takes a cache only
 * under the flags it was made with). Two V8 flags change at run time: the optimizing compiler's,
 * held off at start and put back at the first answer (above), and the young generation's growth
 * factor (the server releases bin/gateway's hold under load, V8 resets it with each new isolate).
 * What differs is set as it was at start for the moment the cache is made, then put back (the
 * growth factor to V8's 2: while its hold lasts, the server sets it to 1 again within a second).
 * Throws when the flags still differ.
 */
const cacheUnderStartFlags = (script) => {
  let optimizer = false
  let growth = false
  try {
    if (v8.cachedDataVersionTag() !== tag && holdsOptimizer && !optimizerHeld) {
      holdOptimizer()
      optimizer = true
    }
    if (v8.cachedDataVersionTag() !== tag) {
      v8.setFlagsFromString("--semi-space-growth-factor=1")
      growth = true
    }
    if (v8.cachedDataVersionTag() !== tag) throw new Error("the V8 flags changed since start")
    return script.createCachedData()
  } finally {
    if (growth) v8.setFlagsFromString("--semi-space-growth-factor=2")
    if (optimizer) putOptimizerBack()
  }
}

/**
 * Writes this process's own cache of serve.cjs, made under the flags the process started with.
 * Best effort: a read-only install or a full disk leaves things as they were.
 */
const writeOwnCache = (script) => {
  const dir = path.dirname(ownCache)
  const temporary = \`\${ownCache}.\${process.pid}.\${randomBytes(4).toString("hex")}.tmp\`
  let fd
  try {
    // Opened first: a read-only install costs no serialization.
    fd = openSync(temporary, "wx")
    const data = cacheUnderStartFlags(script)
    const head = Buffer.alloc(4)
    head.writeUInt32LE(zlib.crc32(data))
    writeSync(fd, head)
    writeSync(fd, data)
    fsyncSync(fd)
    closeSync(fd)
    fd = undefined
    renameSync(temporary, ownCache)
    // Own caches of every build of serve.cjs for this V8 (another build's are the oldest: pruned first).
    const prefix = \`${SERVER}.\${process.versions.v8}.\`
    const caches = []
    for (const f of readdirSync(dir)) {
      if (!f.startsWith(prefix) || !f.includes(".flags-")) continue
      try {
        const at = statSync(path.join(dir, f)).mtimeMs
        // Another process's temporary file, left by a crash.
        if (f.endsWith(".tmp")) {
          if (Date.now() - at > 60_000) unlinkSync(path.join(dir, f))
        } else if (f.endsWith(".cache")) caches.push({ file: path.join(dir, f), at })
      } catch {}
    }
    caches.sort((a, b) => b.at - a.at)
    for (const old of caches.slice(OWN_CACHES)) unlinkSync(old.file)
  } catch {
    if (fd !== undefined) closeSync(fd)
    try {
      unlinkSync(temporary)
    } catch {}
  }
}

const runServer = (own) => {
  const filename = fileURLToPath(server)
  let cachedData
  if (!warmUp)
    try {
      cachedData = own ?? readFileSync(cache)
    } catch {}
  const script = new vm.Script(readInPieces(filename), { filename, cachedData })
  // Written when the warm-up is told to stop, before the server's own handlers run: what the
  // start and the first requests compiled, not the shutdown.
  if (warmUp)
    process.prependOnceListener("SIGTERM", () => {
      // A throw here would stop the server's own SIGTERM handling, and the build would wait for it.
      try {
        writeFileSync(cache, cacheUnderStartFlags(script))
      } catch (e) {
        process.stderr.write(\`gateway: no code cache written: \${e.message}\\n\`)
      }
    })
  else if (cachedData === undefined || script.cachedDataRejected) setTimeout(() => writeOwnCache(script), OWN_CACHE_AFTER_MS).unref()
  const module = { exports: {} }
  script.runInThisContext()(module.exports, Module.createRequire(filename), module, filename, path.dirname(filename))
}

const own = serving && !warmUp ? readOwnCache() : undefined
if (serving && (warmUp || own !== undefined || existsSync(cache))) runServer(own)
else {
  // No cache for this V8: the chunks, with the compilers as they were.
  if (optimizerHeld) putOptimizerBack()
  await import("./cli.mjs")
}
`
writeFileSync(path.join(outdir, "gateway.mjs"), LOADER)
outputs["gateway.mjs"] = []
writeFileSync(path.join(outdir, "modules.json"), JSON.stringify(outputs))

/**
 * A stand-in upstream for the warm-up, on 127.0.0.1: OpenAI's chat completions, answered whole or
 * streamed (with usage), as an OpenAI-compatible provider answers them.
 */
const warmUpstream = () =>
  new Promise((resolve, reject) => {
    const head = { id: "chatcmpl-warm-up", created: 1767225600, model: "m" }
    const usage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }
    const server = http.createServer((req, res) => {
      let body = ""
      req.on("data", (c) => (body += c))
      req.on("end", () => {
        if (!/"stream"\s*:\s*true/.test(body)) {
          const answer = {
            ...head,
            object: "chat.completion",
            choices: [{ index: 0, message: { role: "assistant", content: "warm" }, finish_reason: "stop" }],
            usage
          }
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify(answer))
          return
        }
        res.writeHead(200, { "content-type": "text/event-stream" })
        const event = (choices, more = {}) => `data: ${JSON.stringify({ ...head, object: "chat.completion.chunk", choices, ...more })}\n\n`
        const chunk = (delta, finish = null) => event([{ index: 0, delta, finish_reason: finish }])
        // As OpenAI streams with include_usage (the gateway asks for it): the usage in a last chunk without choices.
        res.end(
          chunk({ role: "assistant", content: "" }) +
            chunk({ content: "wa" }) +
            chunk({ content: "rm" }) +
            chunk({}, "stop") +
            event([], { usage }) +
            "data: [DONE]\n\n"
        )
      })
    })
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve(server))
  })

/** How long the warm-up waits for any one step (a command, the start, an answer, the stop) before it gives up. */
const WARM_UP_STEP_MS = 60_000

/** `bin/gateway <args>` run to its end; rejects with its output when it fails or takes over WARM_UP_STEP_MS. */
const gatewayCommand = (args, env) =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, "bin/gateway"), ...args], { env, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (c) => (output += c))
    child.stderr.on("data", (c) => (output += c))
    const timer = setTimeout(() => child.kill("SIGKILL"), WARM_UP_STEP_MS)
    child.once("error", reject)
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolve()
      else reject(new Error(`gateway ${args[0]} exited with ${code ?? signal}: ${output.slice(-2000)}`))
    })
  })

/**
 * The warm-up: the server started once (a temporary data directory, 127.0.0.1, no .env) with one
 * OpenAI-compatible connection to a stand-in upstream, sent a chat completion answered whole and
 * one streamed once it listens, and stopped; its code cache then holds what a start and a first
 * inference request compile, the upstream's answer read, counted and sent on (the first request of
 * a start no longer compiles them from source: ~15 ms, docs/performance.md, "2026-12-02
 * (afternoon)"). No management request: the management plane is built on its first request
 * (docs/performance.md, "Start-up"), and its code, deserialized at every start, would cost a start
 * memory and time it does not use (the connection is added by `gateway setup`, a process of its
 * own). Without a cache (this fails) `gateway` runs the chunks, as every command does.
 */
const warmUp = async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "gateway-code-cache-"))
  let upstream
  let child
  let exited
  try {
    upstream = await warmUpstream()
    const port = await new Promise((resolve, reject) => {
      const s = net.createServer().once("error", reject)
      s.listen(0, "127.0.0.1", () => {
        const { port } = s.address()
        s.close(() => resolve(port))
      })
    })
    const env = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: dataDir,
      DATA_DIR: dataDir,
      GATEWAY_ENV_FILE: path.join(dataDir, ".env"),
      HOST: "127.0.0.1",
      PORT: String(port),
      LOG_LEVEL: "info",
      NO_COLOR: "1"
    }
    await gatewayCommand(
      [
        "setup",
        "--non-interactive",
        "--add-provider",
        "--provider",
        "openai-compatible",
        "--provider-base-url",
        `http://127.0.0.1:${upstream.address().port}/v1`,
        "--api-key",
        "warm-up",
        "--default-model",
        "m"
      ],
      env
    )
    child = spawn(process.execPath, [path.join(root, "bin/gateway")], {
      env: { ...env, GATEWAY_WRITE_CODE_CACHE: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (c) => (output += c))
    child.stderr.on("data", (c) => (output += c))
    exited = new Promise((resolve) => child.once("exit", resolve))
    const ask = (body) =>
      new Promise((resolve) => {
        const req = http.request(
          {
            host: "127.0.0.1",
            port,
            method: "POST",
            path: "/v1/chat/completions",
            agent: false,
            headers: { "content-type": "application/json" }
          },
          (res) => {
            res.resume()
            res.on("end", () => resolve(res.statusCode))
          }
        )
        req.setTimeout(WARM_UP_STEP_MS, () => req.destroy())
        req.on("error", () => resolve(0))
        req.end(JSON.stringify(body))
      })
    const deadline = Date.now() + 60_000
    while (!output.includes("listening on")) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the server did not start: ${output.slice(-2000)}`)
      await new Promise((r) => setTimeout(r, 20))
    }
    const messages = [{ role: "user", content: "hi" }]
    for (const body of [
      { model: "openai-compatible/m", messages },
      { model: "openai-compatible/m", messages, stream: true }
    ]) {
      const status = await ask(body)
      if (status !== 200)
        throw new Error(`the server answered ${status} to a chat completion${body.stream ? " (streamed)" : ""}: ${output.slice(-2000)}`)
    }
    // The answers' usage rows start the store's writer thread, and a new isolate sets V8's young
    // generation growth factor back while it starts: a cache made at that moment (a SIGTERM just
    // after the answers) can carry flags no start has, and V8 refuses it (seen in two builds of a
    // dozen). The server is stopped once the thread is up.
    await new Promise((r) => setTimeout(r, 2_000))
  } finally {
    if (child !== undefined && child.exitCode === null) {
      child.kill("SIGTERM")
      const killer = setTimeout(() => child.kill("SIGKILL"), WARM_UP_STEP_MS)
      await exited
      clearTimeout(killer)
    }
    upstream?.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}
try {
  await warmUp()
  const made = path.join(outdir, `${SERVER}.${process.versions.v8}.cache`)
  if (!existsSync(made)) throw new Error("no cache was written")
} catch (e) {
  console.warn(`bundle-cli: no code cache for the server (\`gateway\` will run the chunks): ${e.message}`)
}
