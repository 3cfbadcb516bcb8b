#!/usr/bin/env node
// Builds the gateway's addon (native/README.md: the transparent capture's sockets, the SQLite writer thread's policy) with node-gyp, the one npm ships, into
// native/build/Release/gateway_tproxy.node. Runs at `npm install` / `npm ci` (package.json's
// `install` script) and as `npm run build:native`.
//
// It never fails the install: on a platform other than Linux, or when the build cannot run (no
// python3, make or C compiler, no Node headers), it prints one line saying transparent capture
// will be unavailable and why, keeps node-gyp's output in native/build/build.log, and exits 0.
// The gateway then reports the mode as unavailable (src/services/inspector/tproxy/native.ts).
//
// Node's headers: `npm_config_nodedir` when set (npm sets it from its config during npm scripts;
// CI's Node 22 pass sets it to Node 22's headers), else the headers installed beside this Node
// (<prefix>/include/node), else node-gyp's own cache or download.
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))
const addon = path.join(here, "build", "Release", "gateway_tproxy.node")
const log = path.join(here, "build", "build.log")
const rel = (p) => path.relative(process.cwd(), p) || "."
/** Building longer than this is hanging (a header download with no network, say): give up. */
const TIMEOUT_MS = 5 * 60_000

const unavailable = (why) => {
  console.log(`gateway: transparent capture (TPROXY) will be unavailable, the SQLite writer thread runs at nice 10 only, and the C heap's freed pages are not given back: ${why}`)
  process.exit(0)
}

/** The package directory above `file` whose package.json is named `name`. */
const packageAbove = (file, name) => {
  for (let dir = path.dirname(file); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    try {
      if (JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).name === name) return dir
    } catch {
      // no package.json here
    }
  }
  return undefined
}

/** node-gyp's CLI: npm's, as npm names it during scripts, or found beside npm or this Node. */
const findNodeGyp = () => {
  const candidates = []
  if (process.env.npm_config_node_gyp) candidates.push(process.env.npm_config_node_gyp)
  const npmCli = [process.env.npm_execpath]
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) if (dir) npmCli.push(path.join(dir, "npm"))
  for (const cli of npmCli) {
    if (!cli || !existsSync(cli)) continue
    let npmDir
    try {
      npmDir = packageAbove(realpathSync(cli), "npm")
    } catch {
      continue
    }
    if (npmDir) candidates.push(path.join(npmDir, "node_modules", "node-gyp", "bin", "node-gyp.js"))
  }
  const prefix = path.dirname(path.dirname(realpathSync(process.execPath)))
  candidates.push(path.join(prefix, "lib", "node_modules", "npm", "node_modules", "node-gyp", "bin", "node-gyp.js"))
  return candidates.find((c) => existsSync(c))
}

/** Where Node's headers are: npm's nodedir, or the ones installed with this Node, or undefined (node-gyp's default). */
const findNodeDir = () => {
  if (process.env.npm_config_nodedir) return process.env.npm_config_nodedir
  const prefix = path.dirname(path.dirname(realpathSync(process.execPath)))
  return existsSync(path.join(prefix, "include", "node", "node_api.h")) ? prefix : undefined
}

/** The first line of `text` matching `re`, trimmed, or undefined. */
const firstLine = (text, re) =>
  text
    .split("\n")
    .find((l) => re.test(l))
    ?.trim()

/** Why a failed node-gyp run failed, in a few words, from its output. */
const diagnose = (output) => {
  if (/Could not find any Python|find Python/i.test(output)) return "no Python 3 for node-gyp (install python3)"
  if (/not found: make|spawn make ENOENT/.test(output)) return "no make (install make)"
  // gyp runs $CC itself first (the compiler's predefined macros): a CC that does not exist ends there.
  const missing = /FileNotFoundError: .*No such file or directory: '([^']+)'/.exec(output)
  if (missing) return `${missing[1]} not found${process.env.CC ? ` (CC=${process.env.CC})` : ""} (install gcc or clang)`
  // A nodedir without Node's headers: "gyp: <nodedir>/common.gypi not found ...".
  const gyp = firstLine(output, /^gyp: /)
  if (gyp) return `${gyp.replace(/^gyp: /, "")} (is nodedir a directory holding include/node?)`
  if (/ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|getaddrinfo|headers\.tar\.gz/.test(output))
    return "Node's headers are not on this machine and could not be downloaded (set npm_config_nodedir to a directory holding include/node)"
  if (/`make` failed/.test(output)) {
    const cc = process.env.CC ? ` (CC=${process.env.CC})` : ""
    // The compiler's own first complaint, else make's.
    const error = firstLine(output, /^(?!gyp ).*(fatal error|error:|: not found|No such file)/) ?? firstLine(output, /^make: \*\*\*/)
    return `the C compiler failed${cc}${error ? `: ${error}` : ""} (install gcc or clang)`
  }
  return firstLine(output, /^gyp ERR! stack \w*Error/)?.replace(/^gyp ERR! stack /, "") ?? "node-gyp failed"
}

const main = () => {
  if (process.platform !== "linux") unavailable(`not Linux (${process.platform}): TPROXY, IP_TRANSPARENT and SO_MARK are Linux features`)
  const nodeGyp = findNodeGyp()
  if (!nodeGyp) unavailable("node-gyp not found (it ships with npm: run this through npm, or set npm_config_node_gyp)")
  const nodedir = findNodeDir()
  const args = [nodeGyp, "rebuild", "--loglevel=warn", ...(nodedir ? [`--nodedir=${nodedir}`] : [])]
  const run = spawnSync(process.execPath, args, { cwd: here, encoding: "utf8", timeout: TIMEOUT_MS, maxBuffer: 64 << 20 })
  const output = `$ ${process.execPath} ${args.join(" ")}\n${run.stdout ?? ""}${run.stderr ?? ""}${run.error ? `\n${run.error.message}\n` : ""}`
  const writeLog = () => {
    try {
      mkdirSync(path.dirname(log), { recursive: true })
      writeFileSync(log, output)
    } catch {
      // the log is a convenience
    }
  }
  if (run.status === 0 && existsSync(addon)) {
    writeLog()
    console.log(`gateway: built ${rel(addon)}: transparent capture (TPROXY) is available, the SQLite writer thread runs under SCHED_BATCH, the C heap's freed pages are given back (glibc)`)
    return
  }
  writeLog()
  const why = run.error?.code === "ETIMEDOUT" ? `node-gyp did not finish in ${TIMEOUT_MS / 60_000} minutes` : diagnose(output)
  unavailable(`the native addon did not build: ${why}; details in ${rel(log)}`)
}

try {
  main()
} catch (e) {
  unavailable(`the native addon did not build: ${e instanceof Error ? e.message : String(e)}`)
}
