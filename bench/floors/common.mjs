// Shared by the design floors: the gateway's own copies of undici and effect (so the floors use
// exactly what the gateway uses), argument parsing, and the request body read.
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const rootRequire = createRequire(path.join(ROOT, "package.json"))

export const { Agent } = rootRequire("undici")
/** An ESM module of the gateway's `effect` package, e.g. `effect("Effect")`. */
export const effect = (name) =>
  import(pathToFileURL(path.join(path.dirname(rootRequire.resolve("effect/package.json")), "dist/esm", `${name}.js`)).href)

export const arg = (name, dflt) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : dflt)
export const upstreamOrigin = () => new URL(arg("--upstream", "http://127.0.0.1:8000")).origin

/** The gateway's upstream client settings that matter here: keep-alive pools per origin. */
export const makeAgent = () => new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, headersTimeout: 0 })

export const readAll = (stream, done) => {
  const chunks = []
  stream.on("data", (c) => chunks.push(c))
  stream.on("end", () => done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)))
}

/** The body sent upstream: parsed and written again, as any gateway that reads the model must. */
export const reencode = (raw) => JSON.stringify(JSON.parse(raw.toString("utf8")))

export const listen = (server) => {
  server.listen(Number(arg("--port", "0")), "127.0.0.1", () => console.log(`listening ${server.address().port}`))
  const stop = () => server.close(() => process.exit(0)) && server.closeAllConnections()
  process.on("SIGTERM", stop)
  process.on("SIGINT", stop)
}
