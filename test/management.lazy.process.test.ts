import * as fs from "node:fs"
import * as path from "node:path"
import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { ADMIN_KEY, setupWithProvider, startServerProcess } from "./support/cli.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { tempDir } from "./support/gateway.js"

/**
 * The management API (src/management/api/Api.ts: every group's endpoints and their schemas) is
 * loaded with the management plane, on its first request (ManagementHandler.ts), not at start: a
 * start that evaluated it spent ~50 ms more to its first answer (docs/performance.md, "2026-12-02
 * (midday)"). The services built at start reach the plane's code only through what is split off
 * for them: Auth.ts identifies callers for the dashboard's feeds and the MCP endpoint without the
 * route table (AuthMiddleware.ts has the role checks that read it), and the sync server's client
 * (the cloud group) loads with its first call. The packages only a feature uses load with its
 * first use too (docs/performance.md, "Start: what loads on first use"). The compiled tree
 * (dist/cli/main.js, whose modules load one by one) run with a module trace shows which modules a
 * process loaded.
 */
const fake = fakeOpenAIForFile()
const MAIN = path.resolve("dist/cli/main.js")
const MODULE_TRACE = path.resolve("bench/lib/moduleTrace.mjs")
const PLANE_ONLY = [
  "management/api/Api.js",
  "management/api/routeAccess.js",
  "management/api/AuthMiddleware.js",
  "management/api/keys/Api.js"
]

/** Packages (and parts of them) that only a feature uses: none loads through a start and a chat request. */
const FEATURE_ONLY = [
  "/node_modules/undici/index.js",
  "/node_modules/undici/lib/web/",
  "/node_modules/ws/",
  "/node_modules/openid-client/",
  "/node_modules/@fastify/busboy/",
  "/@effect/platform/dist/esm/HttpApiClient.js",
  "/@effect/platform-node/dist/esm/NodeContext.js",
  "/dist/management/sync/syncClient.js"
]

/** The dist/ modules a server loaded, from its trace (the URLs it loaded), as paths below dist/. */
const distModules = (loaded: ReadonlyArray<string>) =>
  loaded.flatMap((u) => {
    const at = u.indexOf("/dist/")
    return at < 0 ? [] : [u.slice(at + "/dist/".length)]
  })

/** Starts the tree on a configured data directory, answers a chat completion, runs `more`, stops, and returns what it loaded. */
const serveAndTrace = async (more: (base: string) => Promise<void>) => {
  const dir = tempDir("gw-management-lazy-")
  const dataDir = path.join(dir, "data")
  expect((await setupWithProvider(dataDir, fake.upstream.baseUrl)).code).toBe(0)
  const trace = path.join(dir, "modules.txt")
  const server = await startServerProcess({ DATA_DIR: dataDir, GATEWAY_ENV_FILE: path.join(dir, ".env"), MODULE_TRACE_OUT: trace }, [], {
    nodeArgs: ["--import", MODULE_TRACE],
    entry: MAIN,
    startMs: 60_000
  })
  try {
    fake.upstream.next({ content: "answer from the upstream" })
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: ADMIN_KEY, maxRetries: 0 })
    const completion = await client.chat.completions.create({ model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] })
    expect(completion.choices[0]?.message.content).toBe("answer from the upstream")
    await more(server.url)
  } finally {
    expect(await server.stop()).toBe(0)
  }
  return fs.readFileSync(trace, "utf8").split("\n")
}

describe("the management API loads with the management plane, not at start", () => {
  it("a start and an inference request load none of it; the first management request loads it", async () => {
    const loaded = await serveAndTrace(async () => {})
    const served = distModules(loaded)
    // The server itself and the parts of the management area built at start did load.
    expect(served).toContain("server/serve.js")
    expect(served).toContain("management/api/ManagementHandler.js")
    expect(served).toContain("management/api/Auth.js")
    for (const module of PLANE_ONLY) expect(served, module).not.toContain(module)

    // undici's dispatchers come from their own modules.
    expect(loaded.some((u) => u.endsWith("/node_modules/undici/lib/dispatcher/agent.js"))).toBe(true)
    for (const part of FEATURE_ONLY)
      expect(
        loaded.filter((u) => u.includes(part)),
        part
      ).toEqual([])

    const managed = distModules(
      await serveAndTrace(async (base) => {
        const res = await fetch(`${base}/api/keys`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
        expect(res.status).toBe(200)
      })
    )
    for (const module of PLANE_ONLY) expect(managed, module).toContain(module)
  }, 120_000)
})
