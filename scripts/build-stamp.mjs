#!/usr/bin/env node
// Whether dist/ is older than what builds into it, so that `npm start` builds only when it must.
//   node scripts/build-stamp.mjs begin   (npm's prebuild) notes when a build started
//   node scripts/build-stamp.mjs end     (the build's last step) the build finished: dist/ is that of
//                                        the sources as they were when it started
//   node scripts/build-stamp.mjs start   (npm's prestart) runs `npm run build` when dist/ is missing,
//                                        unfinished or older than a source, else says it is up to date
// A build's inputs: src/, web/ (its sources, page and configs), scripts/, the TypeScript configs and
// package.json and package-lock.json (a dependency's version changes the bundle).
import { spawnSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync, mkdirSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/** What builds into dist/, relative to the root: directories are walked. */
export const INPUTS = [
  "src",
  "web/src",
  "web/index.html",
  "web/vite.config.ts",
  "web/tsconfig.json",
  "scripts",
  "tsconfig.json",
  "tsconfig.build.json",
  "package.json",
  "package-lock.json"
]
/** What a finished build leaves (its absence means dist/ must be built). */
export const OUTPUTS = ["dist/cli/main.js", "dist/bundle/modules.json", "dist/web/index.html"]
/** Written by the build itself (scripts/build-web.mjs, when the API changed): not an input. */
const GENERATED = new Set(["web/src/api/schema.d.ts"])
const STAMP = "dist/.build-stamp"
const PENDING = "dist/.build-pending"

/** The newest modification time (ms) under `file` and the path that has it. */
const newest = (file, root) => {
  let best = { ms: 0, file: undefined }
  if (GENERATED.has(path.relative(root, file).split(path.sep).join("/"))) return best
  let st
  try {
    st = statSync(file)
  } catch {
    return best
  }
  if (!st.isDirectory()) return { ms: st.mtimeMs, file }
  for (const name of readdirSync(file)) {
    if (name === "node_modules" || name.startsWith(".")) continue
    const sub = newest(path.join(file, name), root)
    if (sub.ms > best.ms) best = sub
  }
  return best
}

/** Why `root`'s dist/ must be built, or undefined when it is up to date. */
export const staleness = (root = ROOT) => {
  for (const out of OUTPUTS) if (!existsSync(path.join(root, out))) return `${out} is missing`
  let builtFrom
  try {
    builtFrom = Number(readFileSync(path.join(root, STAMP), "utf8"))
  } catch {
    return "no finished build is recorded (dist/.build-stamp)"
  }
  if (!Number.isFinite(builtFrom)) return "dist/.build-stamp is unreadable"
  for (const input of INPUTS) {
    const n = newest(path.join(root, input), root)
    if (n.ms > builtFrom) return `${path.relative(root, n.file)} changed since the last build`
  }
  return undefined
}

const main = process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
const [command, dir] = main ? process.argv.slice(2) : []
const root = dir ? path.resolve(dir) : ROOT
if (command === "begin") {
  mkdirSync(path.join(root, "dist"), { recursive: true })
  // A source saved while the build runs is newer than this: the next start builds again.
  writeFileSync(path.join(root, PENDING), String(Date.now()))
} else if (command === "end") {
  if (existsSync(path.join(root, PENDING))) renameSync(path.join(root, PENDING), path.join(root, STAMP))
} else if (command === "start") {
  const why = staleness(root)
  if (why === undefined) {
    console.error("dist/ is up to date: not building (npm run build builds anyway)")
  } else {
    console.error(`building: ${why}`)
    const r = spawnSync(process.platform === "win32" ? "npm.cmd" : "npm", ["run", "build"], { cwd: root, stdio: "inherit" })
    process.exit(r.status ?? 1)
  }
} else if (command !== undefined) {
  console.error(`usage: build-stamp.mjs begin|end|start [root]`)
  process.exit(2)
}
