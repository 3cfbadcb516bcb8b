import { readFileSync } from "node:fs"
import path from "node:path"
import { PACKAGE_ROOT } from "./packageRoot.js"

/** package.json at the package root, read once. */
const pkg = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, "package.json"), "utf8")) as { name: string; version: string }

/** Build version. */
export const VERSION: string = pkg.version

/** The npm package this build is (what `gateway update` looks up). */
export const PACKAGE_NAME: string = pkg.name
