/**
 * The package's root directory (where package.json and skills/ are): the nearest directory
 * above this module that holds a package.json. The same answer from src/ (tests), dist/ (the
 * compiled tree) and dist/bundle/ (the CLI bundle, whose chunks sit one level deeper).
 */
import { existsSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"

const find = (from: string): string => {
  let dir = from
  for (;;) {
    if (existsSync(path.join(dir, "package.json"))) return dir
    const up = path.dirname(dir)
    if (up === dir) return from
    dir = up
  }
}

export const PACKAGE_ROOT: string = find(path.dirname(fileURLToPath(import.meta.url)))
