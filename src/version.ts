import { createRequire } from "node:module"

const require = createRequire(import.meta.url)

/** package.json (one level above both src/ and dist/), read once. */
const pkg = require("../package.json") as { name: string; version: string }

/** Build version. */
export const VERSION: string = pkg.version

/** The npm package this build is (what `gateway update` looks up). */
export const PACKAGE_NAME: string = pkg.name
