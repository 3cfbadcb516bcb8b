import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir } from "./gateway.js"

/**
 * Fake coding-tool executables in a temporary directory, for PATH: each a tiny shell script.
 * `counted` appends a line to `<dir>/<name>.runs` on every run, so a test can see how often the
 * gateway ran it.
 */
export const fakeToolDir = (tools: (dir: string) => Readonly<Record<string, string>>): string => {
  const dir = tempDir("gw-fake-tools-")
  for (const [name, body] of Object.entries(tools(dir))) writeTool(dir, name, body)
  return dir
}

export const writeTool = (dir: string, name: string, body: string) => {
  const file = path.join(dir, name)
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 })
  return file
}

/** Prints `version` for `--version`, counting runs. */
export const counted = (dir: string, name: string, version: string) => `echo run >> '${path.join(dir, `${name}.runs`)}'\necho '${version}'`

export const runsOf = (dir: string, name: string): number => {
  try {
    return fs
      .readFileSync(path.join(dir, `${name}.runs`), "utf8")
      .split("\n")
      .filter(Boolean).length
  } catch {
    return 0
  }
}

/** Never answers. */
export const hangs = "exec sleep 60"

/** The PATH a fake-tool directory needs (sh, sleep, env). */
export const pathWith = (dir: string) => `${dir}:/usr/bin:/bin`
