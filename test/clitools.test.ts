import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as TOML from "smol-toml"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { counted, fakeToolDir, hangs, pathWith, runsOf, writeTool } from "./support/fakeTools.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * `/api/cli-tools/*` and `/api/acp/agents` against a real gateway whose tools live in a temporary
 * HOME and PATH (GATEWAY_CLI_TOOLS_HOME, GATEWAY_CLI_TOOLS_PATH) filled with fake executables.
 */
const ADMIN = "gwk_clitools_admin_0123456789abcdef"
const CLIENT_KEY = "gwk_clitools_client_0123456789abcdef"
const SECRET_IN_OUTPUT = "sk-leaked-in-version-output-0123456789"

let gw: TestGateway
let up: FakeUpstream
let home: string
let bin: string

const api = (p: string, init: { method?: string; body?: unknown } = {}) =>
  call(`${gw.url}${p}`, { ...init, headers: { authorization: `Bearer ${ADMIN}` } })

beforeAll(async () => {
  up = await FakeUpstream.start()
  home = tempDir("gw-clitools-home-")
  bin = fakeToolDir((dir) => ({
    codex: counted(dir, "codex", "codex-cli 0.169.0"),
    claude: "echo '2.1.330 (Claude Code)'",
    gemini: hangs,
    qwen: `echo 'fatal: bad credentials ${SECRET_IN_OUTPUT}' >&2\nexit 3`
  }))
  gw = await startGateway({
    env: { GATEWAY_CLI_TOOLS_HOME: home, GATEWAY_CLI_TOOLS_PATH: pathWith(bin), GATEWAY_CLI_TOOLS_DETECT_TIMEOUT_MS: "1000" }
  })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const res = await api("/api/providers", {
    body: { provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" }
  })
  expect(res.status).toBe(201)
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

describe("GET /api/cli-tools/all-statuses", () => {
  it("detects each tool by running `--version` on the PATH, within the timeout, with sanitised reasons", async () => {
    const res = await api("/api/cli-tools/all-statuses")
    expect(res.status).toBe(200)
    const s = res.body
    // Tools with full base-URL support only (CLI_COMPAT_ALL is off).
    expect(Object.keys(s).sort()).toEqual(["claude", "cline", "codex", "continue", "gemini", "kilo", "opencode", "qwen"])
    expect(s.codex.detection).toEqual({
      installed: true,
      runnable: true,
      version: "0.169.0",
      command: "codex",
      commandPath: path.join(bin, "codex")
    })
    expect(s.claude.detection.version).toBe("2.1.330")
    expect(s.gemini.detection).toMatchObject({ installed: true, runnable: false })
    expect(s.gemini.detection.reason).toBe("'gemini --version' did not answer within 1 s")
    expect(s.qwen.detection).toMatchObject({ installed: true, runnable: false })
    expect(s.qwen.detection.reason).toContain("exited with 3: fatal: bad credentials")
    expect(JSON.stringify(s)).not.toContain(SECRET_IN_OUTPUT)
    expect(s.opencode).toEqual({
      detection: { installed: false, runnable: false, command: "opencode", reason: "'opencode' was not found on the PATH" },
      config: { status: "not_installed" }
    })
    expect(s.codex.config).toEqual({ status: "not_configured" })
    expect(s.cline.config).toEqual({ status: "not_installed" })
  })

  it("runs detection again only when the executable or a configuration file changed (modification time)", async () => {
    await api("/api/cli-tools/all-statuses")
    const before = runsOf(bin, "codex")
    await api("/api/cli-tools/all-statuses")
    await api("/api/cli-tools/runtime/codex")
    expect(runsOf(bin, "codex")).toBe(before)
    const file = path.join(home, ".codex", "config.toml")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, 'model = "x"\n')
    fs.utimesSync(file, new Date(), new Date(Date.now() + 60_000))
    const after = (await api("/api/cli-tools/all-statuses")).body
    expect(runsOf(bin, "codex")).toBe(before + 1)
    expect(after.codex.config).toEqual({ status: "not_configured" })
    fs.rmSync(file)
  })

  it("reports a configuration file it cannot parse as unknown, with a one-line error and no stack", async () => {
    const file = path.join(home, ".qwen", "settings.json")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, `{ "security": { "auth": { "apiKey": "${SECRET_IN_OUTPUT}" `)
    const s = (await api("/api/cli-tools/all-statuses")).body
    expect(s.qwen.config).toEqual({ status: "unknown" })
    expect(s.qwen.error).toContain(`cannot read ${file}: not valid JSON`)
    expect(s.qwen.error).not.toMatch(/\n|^\s+at /m)
    expect(JSON.stringify(s)).not.toContain(SECRET_IN_OUTPUT)
    const save = await api("/api/cli-tools/qwen-settings", { body: { apiKey: CLIENT_KEY, model: "up/m1" } })
    expect(save.status).toBe(400)
    expect(save.body.message).toContain("fix or move the file")
    expect(fs.readFileSync(file, "utf8")).toContain(SECRET_IN_OUTPUT)
    fs.rmSync(file)
  })
})

describe("/api/cli-tools/{tool}-settings", () => {
  it("writes Codex's config.toml pointing at this gateway, reads it back as configured, and backs up what it replaces", async () => {
    const file = path.join(home, ".codex", "config.toml")
    fs.writeFileSync(
      file,
      'approval_policy = "on-request"\n\n[model_providers.other]\nname = "other"\nbase_url = "https://example.invalid/v1"\n'
    )
    const original = fs.readFileSync(file, "utf8")
    const res = await api("/api/cli-tools/codex-settings", { body: { model: "up/m1" } })
    expect(res.status).toBe(200)
    expect(res.body.written).toHaveLength(1)
    expect(res.body.written[0].path).toBe(file)
    expect(fs.readFileSync(res.body.written[0].backup, "utf8")).toBe(original)
    expect(res.body.env).toEqual({ GATEWAY_CODEX_API_KEY: "<your gateway key>" })
    const toml = TOML.parse(fs.readFileSync(file, "utf8")) as any
    expect(toml.approval_policy).toBe("on-request")
    expect(toml.model_providers.other.name).toBe("other")
    expect(toml).toMatchObject({ model: "up/m1", model_provider: "gateway" })
    expect(toml.model_providers.gateway).toEqual({
      name: "gateway",
      base_url: `${gw.url}/v1`,
      env_key: "GATEWAY_CODEX_API_KEY",
      wire_api: "responses"
    })
    expect((fs.statSync(file).mode & 0o777).toString(8)).toBe("600")

    const settings = (await api("/api/cli-tools/codex-settings")).body
    expect(settings).toMatchObject({
      tool: "codex",
      files: [file],
      exists: true,
      baseUrl: gw.url,
      apiKey: null,
      apiKeyEnv: "GATEWAY_CODEX_API_KEY",
      model: "up/m1"
    })
    const status = (await api("/api/cli-tools/all-statuses")).body.codex.config
    expect(status).toMatchObject({ status: "configured", endpoint: gw.url })
    expect(Date.parse(status.lastConfiguredAt)).toBeGreaterThan(0)
  })

  it("merges Claude Code's settings.json, keeping the user's other settings, and masks the key when read", async () => {
    const file = path.join(home, ".claude", "settings.json")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(
      file,
      JSON.stringify({
        theme: "dark",
        env: { FOO: "1", ANTHROPIC_API_KEY: "sk-ant-old-0123456789abcdef" },
        permissions: { allow: ["Read"] }
      })
    )
    const res = await api("/api/cli-tools/claude-settings", { body: { apiKey: CLIENT_KEY } })
    expect(res.status).toBe(200)
    const written = JSON.parse(fs.readFileSync(file, "utf8"))
    expect(written).toEqual({
      theme: "dark",
      env: { FOO: "1", ANTHROPIC_BASE_URL: gw.url, ANTHROPIC_AUTH_TOKEN: CLIENT_KEY },
      permissions: { allow: ["Read"] },
      model: "up/m1"
    })
    expect(JSON.stringify(res.body)).not.toContain(CLIENT_KEY)
    const view = (await api("/api/cli-tools/claude-settings")).body
    expect(view).toMatchObject({ baseUrl: gw.url, model: "up/m1", exists: true })
    expect(view.apiKey).not.toBe(CLIENT_KEY)
    expect(view.apiKey).toMatch(/^gwk_cli.*…/)
    // Again, with an explicit other endpoint: "other", not "configured".
    await api("/api/cli-tools/claude-settings", { body: { baseUrl: "http://192.0.2.7:9999" } })
    expect((await api("/api/cli-tools/all-statuses")).body.claude.config).toMatchObject({
      status: "other",
      endpoint: "http://192.0.2.7:9999"
    })
    const backups = fs.readdirSync(path.dirname(file)).filter((f) => f.startsWith("settings.json.bak-"))
    expect(backups).toHaveLength(2)
  })

  it("answers 404 naming an unknown tool, 404 for a tool without a settings file, and 400 for a bad body", async () => {
    const unknown = await api("/api/cli-tools/vim-settings")
    expect(unknown.status).toBe(404)
    expect(unknown.body.message).toContain("unknown coding tool 'vim'")
    expect((await api("/api/cli-tools/runtime/vim")).status).toBe(404)
    const guide = await api("/api/cli-tools/cline-settings")
    expect(guide.status).toBe(404)
    expect(guide.body.message).toContain("configType guide")
    const hidden = await api("/api/cli-tools/runtime/cursor")
    expect(hidden.status).toBe(404)
    expect(hidden.body.message).toContain("CLI_COMPAT_ALL")
    for (const body of [{ model: 5 }, { apiKey: "short" }, { baseUrl: "ftp://x" }, { nope: true }]) {
      const res = await api("/api/cli-tools/gemini-settings", { body })
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body._tag).toBe("BadRequest")
    }
    const noKey = await api("/api/cli-tools/gemini-settings", { body: { model: "up/m1" } })
    expect(noKey.status).toBe(400)
    expect(noKey.body.message).toContain("apiKey is required")
    const byId = await api("/api/cli-tools/gemini-settings", { body: { keyId: "nope" } })
    expect(byId.status).toBe(400)
    expect(byId.body.message).toContain("no gateway key with id 'nope'")
  })

  it("GET runtime/{toolId} answers the catalog entry with its status", async () => {
    const res = await api("/api/cli-tools/runtime/claude")
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({
      id: "claude",
      name: "Claude Code",
      vendor: "Anthropic",
      category: "code",
      baseUrlSupport: "full",
      configType: "custom",
      acpSpawnable: true
    })
    expect(res.body.status.detection.version).toBe("2.1.330")
  })
})

describe("CLI_COMPAT_ALL", () => {
  it("lists every catalog tool, partial and none included, and detects with the default 5 s timeout", async () => {
    const dir = fakeToolDir(() => ({ cursor: hangs }))
    const other = await startGateway({
      env: { CLI_COMPAT_ALL: "true", GATEWAY_CLI_TOOLS_HOME: tempDir(), GATEWAY_CLI_TOOLS_PATH: pathWith(dir) }
    })
    try {
      await other.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const s = (await call(`${other.url}/api/cli-tools/all-statuses`, { headers: { authorization: `Bearer ${ADMIN}` } })).body
      expect(Object.keys(s)).toEqual(expect.arrayContaining(["cursor", "copilot", "codex"]))
      expect(s.cursor.detection.reason).toBe("'cursor --version' did not answer within 5 s")
      expect(s.cursor.config).toEqual({ status: "unknown" })
      expect(s.copilot.config).toEqual({ status: "not_installed" })
      const runtime = await call(`${other.url}/api/cli-tools/runtime/copilot`, { headers: { authorization: `Bearer ${ADMIN}` } })
      expect(runtime.body).toMatchObject({ id: "copilot", baseUrlSupport: "none", configType: "mitm" })
    } finally {
      await other.close()
    }
  }, 20_000)
})

describe("/api/acp/agents", () => {
  it("lists the built-in agents with detection and a summary", async () => {
    const res = await api("/api/acp/agents")
    expect(res.status).toBe(200)
    const byId = Object.fromEntries(res.body.agents.map((a: any) => [a.id, a]))
    expect(byId.gemini).toEqual({
      id: "gemini",
      name: "Gemini CLI",
      binary: "gemini",
      args: ["--acp"],
      version: null,
      installed: true,
      protocol: "acp",
      isCustom: false
    })
    expect(byId.opencode).toMatchObject({ binary: "opencode", args: ["acp"], installed: false })
    expect(res.body.summary).toMatchObject({ total: res.body.agents.length, custom: 0, builtIn: res.body.agents.length })
    expect(res.body.summary.installed + res.body.summary.notFound).toBe(res.body.summary.total)
  })

  it("adds, refreshes and deletes a custom agent; built-ins cannot be deleted", async () => {
    const add = await api("/api/acp/agents", { body: { id: "my-agent", name: "Mine", binary: "claude", args: ["--acp"] } })
    expect(add.status).toBe(200)
    const mine = add.body.agents.find((a: any) => a.id === "my-agent")
    expect(mine).toEqual({
      id: "my-agent",
      name: "Mine",
      binary: "claude",
      args: ["--acp"],
      version: "2.1.330",
      installed: true,
      protocol: "acp",
      isCustom: true
    })
    expect(add.body.summary.custom).toBe(1)

    const later = writeTool(bin, "goose", "echo 'goose 1.9.0'")
    expect((await api("/api/acp/agents")).body.agents.find((a: any) => a.id === "goose").installed).toBe(false)
    const refreshed = await api("/api/acp/agents", { body: { refresh: true } })
    expect(refreshed.body.agents.find((a: any) => a.id === "goose")).toMatchObject({ installed: true, version: "1.9.0" })
    fs.rmSync(later)

    expect((await api("/api/acp/agents?id=gemini", { method: "DELETE" })).status).toBe(400)
    const del = await api("/api/acp/agents?id=my-agent", { method: "DELETE" })
    expect(del.status).toBe(200)
    expect(del.body).toEqual({ removed: "my-agent" })
    const again = await api("/api/acp/agents?id=my-agent", { method: "DELETE" })
    expect(again.status).toBe(404)
    expect(again.body.message).toContain("my-agent")
    expect((await api("/api/acp/agents")).body.summary.custom).toBe(0)
  })

  it("refuses bad bodies with 400 and a built-in id with 409", async () => {
    for (const body of [{ id: "Bad Id", name: "x", binary: "x" }, { id: "ok", name: "x", binary: "rm -rf /" }, { refresh: false }, {}]) {
      const res = await api("/api/acp/agents", { body })
      expect(res.status, JSON.stringify(body)).toBe(400)
    }
    expect((await api("/api/acp/agents", { body: { id: "gemini", name: "x", binary: "x" } })).status).toBe(409)
    expect((await api("/api/acp/agents", { method: "DELETE" })).status).toBe(400)
  })
})
