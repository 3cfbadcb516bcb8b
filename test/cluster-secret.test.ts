import { fork, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { tempDir } from "./support/gateway.js"

/**
 * The credential the primary of `gateway --workers N` gives its workers (src/kernel/clusterSecret.ts):
 * out of the environment as the module loads, so nothing the worker copies or starts holds it, and
 * taken only by a cluster worker (a process with a channel to its primary and GATEWAY_WORKER_ID).
 * Loaded in a child process, as a worker loads it (the compiled module in dist/).
 */
const MODULE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../dist/kernel/clusterSecret.js")
const SECRET = "ab".repeat(32)

const load = (env: Record<string, string>): Promise<{ left: string | null; taken: string | null }> => {
  const script = path.join(tempDir("cluster-secret-"), "child.mjs")
  fs.writeFileSync(
    script,
    `const m = await import(${JSON.stringify(MODULE)})
process.send({ left: process.env.GATEWAY_CLUSTER_INTERNAL_SECRET ?? null, taken: m.clusterSecret() ?? null }, () => process.exit(0))`
  )
  return new Promise((resolve, reject) => {
    const child = fork(script, [], { env: { PATH: process.env.PATH ?? "", ...env } })
    child.once("message", (m) => resolve(m as { left: string | null; taken: string | null }))
    child.once("error", reject)
    child.once("exit", (code) => reject(new Error(`the child exited (${code}) without an answer`)))
  })
}

/** The same module in a process without a channel to a parent: what it leaves in its environment and takes. */
const loadAlone = (env: Record<string, string>): Promise<{ left: string | null; taken: string | null }> => {
  const script = path.join(tempDir("cluster-secret-"), "alone.mjs")
  fs.writeFileSync(
    script,
    `const m = await import(${JSON.stringify(MODULE)})
process.stdout.write(JSON.stringify({ left: process.env.GATEWAY_CLUSTER_INTERNAL_SECRET ?? null, taken: m.clusterSecret() ?? null }))`
  )
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script], { env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    child.stdout.on("data", (c: Buffer) => (out += c.toString()))
    child.once("error", reject)
    child.once("exit", (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`the child exited ${code}`))))
  })
}

describe("the workers' shared credential", () => {
  it("a cluster worker takes it, and it is no longer in the environment", async () => {
    expect(await load({ GATEWAY_CLUSTER_INTERNAL_SECRET: SECRET, GATEWAY_WORKER_ID: "2" })).toEqual({ left: null, taken: SECRET })
  })

  it("a process that is not a worker leaves it unused (and still out of its environment); a malformed one is not taken", async () => {
    expect(await load({ GATEWAY_CLUSTER_INTERNAL_SECRET: SECRET })).toEqual({ left: null, taken: null })
    expect(await load({ GATEWAY_CLUSTER_INTERNAL_SECRET: "short", GATEWAY_WORKER_ID: "2" })).toEqual({ left: null, taken: null })
    // GATEWAY_WORKER_ID without a channel to a primary: not a worker (anyone can set a variable).
    expect(await loadAlone({ GATEWAY_CLUSTER_INTERNAL_SECRET: SECRET, GATEWAY_WORKER_ID: "2" })).toEqual({ left: null, taken: null })
  })
})
