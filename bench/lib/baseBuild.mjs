// A base commit of the gateway built next to this tree, for the benches that compare two builds in
// one run (egress-direct.mjs, webhooks.mjs): `git archive <commit>` into a temporary directory,
// this tree's node_modules linked in, both built with tsc. `remove()` deletes the directory.
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, symlinkSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const tsc = (rootDir) => path.join(rootDir, "node_modules/typescript/bin/tsc")
const build = (rootDir, dir) =>
  execFileSync(process.execPath, [tsc(rootDir), "-p", "tsconfig.build.json", "--incremental", "false"], { cwd: dir, stdio: "inherit" })

/** The merge base with main: what "before this branch" means by default. */
export const mergeBase = (rootDir) => execFileSync("git", ["merge-base", "HEAD", "main"], { cwd: rootDir }).toString().trim()

export const buildBase = (rootDir, commit, prefix = "gateway-bench-base-") => {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix))
  process.stderr.write(`building base ${commit.slice(0, 10)} in ${dir} and this tree\n`)
  execFileSync("sh", ["-c", `git archive ${commit} | tar -x -C ${dir}`], { cwd: rootDir })
  symlinkSync(path.join(rootDir, "node_modules"), path.join(dir, "node_modules"))
  build(rootDir, dir)
  build(rootDir, rootDir)
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}
