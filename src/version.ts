import { createRequire } from "node:module"

const require = createRequire(import.meta.url)

/** Build version, read once from package.json (one level above both src/ and dist/). */
export const VERSION: string = (require("../package.json") as { version: string }).version
