import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { ADMIN_KEY, runCli, type ServerProcess, setupWithProvider, startServerProcess } from "./support/cli.js"
import { call, tempDir } from "./support/gateway.js"

/**
 * `gateway plugins ...` against a running server process, with the two example plugins users copy
 * (examples/plugins/): installed from their folders, configured, disabled and removed through the
 * CLI, and exercised with real requests.
 */

const EXAMPLES = path.resolve(__dirname, "../examples/plugins")
let up: FakeUpstream
let server: ServerProcess
let env: Record<string, string>

const cli = (...args: Array<string>) => runCli(["plugins", ...args, "--url", server.url], env)
const chat = (headers: Record<string, string> = {}) =>
  call(`${server.url}/v1/chat/completions`, {
    body: { model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] },
    headers: { authorization: `Bearer ${ADMIN_KEY}`, ...headers }
  })

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.always({ content: "from upstream" })
  const dataDir = tempDir("gw-plugins-cli-")
  expect((await setupWithProvider(dataDir, up.baseUrl("openai-chat"))).code).toBe(0)
  env = { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY }
  server = await startServerProcess(env)
})

afterAll(async () => {
  await server?.stop()
  await up?.close()
})

/** An example's module, as a plugin's own tests import it (its `gateway/plugin-sdk` is this package's public entry). */
const example = (name: string): Promise<Record<string, (...args: Array<any>) => any>> => import(path.join(EXAMPLES, name, "index.mjs"))

describe("the example plugins, outside the gateway", () => {
  it("rate-rule-blocker allows perMinute requests a minute per key, then answers its own 429", async () => {
    const { decide } = await example("rate-rule-blocker")
    const settings = { modelPrefix: "gpt-", perMinute: 2, message: "max {perMinute} for {model}" }
    const ctx = { model: "gpt-4o", apiKeyId: "k1" }
    const now = 1_700_000_000_000
    expect(decide!(ctx, settings, now)).toBeUndefined()
    expect(decide!(ctx, settings, now)).toBeUndefined()
    const refused = decide!(ctx, settings, now)
    expect(refused.response).toMatchObject({ status: 429, body: { error: { message: "max 2 for gpt-4o" } } })
    expect(decide!({ model: "claude-3", apiKeyId: "k1" }, settings, now)).toBeUndefined()
    expect(decide!({ model: "gpt-4o", apiKeyId: "k2" }, settings, now)).toBeUndefined()
  })

  it("request-tagger tags with the x-team header or the default", async () => {
    const { tag } = await example("request-tagger")
    const settings = { defaultTeam: "none", header: "x-gateway-team" }
    expect(tag!({ headers: { "x-team": "search" } }, settings)).toEqual([
      { __gateway: "metadata", metadata: { team: "search" } },
      { __gateway: "headers", headers: { "x-gateway-team": "search" } }
    ])
    expect(tag!({ headers: {} }, settings)[0].metadata.team).toBe("none")
  })
})

describe("gateway plugins", () => {
  it("installs both examples from their folders; they run on the server's requests", async () => {
    const blocker = await cli("install", path.join(EXAMPLES, "rate-rule-blocker"))
    expect(blocker.code, blocker.stderr).toBe(0)
    expect(blocker.stdout).toMatch(/^installed rate-rule-blocker 1\.0\.0: enabled, running \(pid \d+\)$/m)
    const tagger = await cli("install", path.join(EXAMPLES, "request-tagger"))
    expect(tagger.code, tagger.stderr).toBe(0)
    const listed = await cli("list")
    expect(listed.stdout).toMatch(/^NAME\s+VERSION\s+ENABLED\s+STATE/m)
    expect(listed.stdout).toMatch(/^rate-rule-blocker\s+1\.0\.0\s+yes\s+running/m)
    expect(listed.stdout).toMatch(/^request-tagger\s+1\.0\.0\s+yes\s+running/m)

    const first = await chat({ "x-team": "search" })
    expect(first.status).toBe(200)
    expect(first.headers.get("x-gateway-team")).toBe("search")
    expect((await chat()).headers.get("x-gateway-team")).toBe("unassigned")
  })

  it("config prints the settings and changes them by their type; a bad value exits 1 with one line", async () => {
    const shown = await cli("config", "rate-rule-blocker")
    expect(shown.stdout).toMatch(/^perMinute\s+60\s+number\s+Requests a minute/m)
    const set = await cli("config", "rate-rule-blocker", "perMinute=0", "modelPrefix=openai")
    expect(set.code, set.stderr).toBe(0)
    expect(set.stdout).toMatch(/^perMinute\s+0\s+number/m)
    const refused = await chat()
    expect(refused.status).toBe(429)
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/)
    expect(refused.body).toEqual({
      error: {
        type: "rate_limit_exceeded",
        code: "plugin_rule",
        message: "slow down: this gateway allows 0 requests a minute for openai-compatible/m1"
      }
    })
    const bad = await cli("config", "rate-rule-blocker", "perMinute=lots")
    expect(bad.code).toBe(1)
    expect(bad.stderr.trim().split("\n")).toHaveLength(1)
    expect(bad.stderr).toMatch(/perMinute: must be a number/)
    const outOfRange = await cli("config", "rate-rule-blocker", "perMinute=-1")
    expect(outOfRange.code).toBe(1)
    expect(outOfRange.stderr).toMatch(/perMinute: must be at least 0/)
    const json = JSON.parse((await cli("config", "rate-rule-blocker", "--json")).stdout)
    expect(json.config).toMatchObject({ perMinute: 0, modelPrefix: "openai" })
  })

  it("disable lets requests through; enable blocks again; remove uninstalls; an unknown name exits 1", async () => {
    expect((await cli("disable", "rate-rule-blocker")).stdout).toMatch(/rate-rule-blocker 1\.0\.0: disabled, stopped/)
    expect((await chat()).status).toBe(200)
    expect((await cli("enable", "rate-rule-blocker")).stdout).toMatch(/enabled, running/)
    expect((await chat()).status).toBe(429)
    expect((await cli("remove", "rate-rule-blocker")).stdout).toBe("removed rate-rule-blocker\n")
    expect((await chat()).status).toBe(200)
    const listed = JSON.parse((await cli("list", "--json")).stdout)
    expect(listed.plugins.map((p: { name: string }) => p.name)).toEqual(["request-tagger"])
    const unknown = await cli("enable", "nope")
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/no plugin "nope" is installed/)
  })
})
