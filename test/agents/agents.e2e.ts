import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../../src/auth/ApiKeys.js"
import { type Family, FakeUpstream } from "../support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "../support/gateway.js"
import { agentResponder, HELLO, SEEN } from "./responder.js"

/**
 * Real coding agents, run non-interactively against the gateway, each with a fake upstream of
 * a different family behind it: the agent must print the upstream's answer, and complete a
 * tool call round trip (the model asks for `echo TOOL_OK`, the agent runs it, the model sees the
 * output). Run with `npm run test:agents`, which installs the pinned agents and isolates the
 * network. Recipes: docs/agents.md.
 */
const AGENTS_DIR = process.env.GATEWAY_AGENTS_DIR ?? path.resolve("node_modules/.cache/gateway-agents")
const ADMIN = "gwk_agents_admin_key_0123456789abcdef"
const KEY = "gwk_agents_client_key_0123456789abcde"

let gw: TestGateway
let up: FakeUpstream

const bin = (agent: string) => path.join(AGENTS_DIR, agent, "node_modules", ".bin", agent)

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const run = (command: string, args: ReadonlyArray<string>, env: Record<string, string>, cwd: string, timeoutMs = 150_000) =>
  new Promise<Run>((resolve) => {
    const child = spawn(command, args, { cwd, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NO_COLOR: "1", TERM: "dumb", ...env }, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c))
    child.stderr.on("data", (c: Buffer) => (stderr += c))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

const write = (file: string, content: string) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, content)
}

/** One agent: how to configure it in a fresh HOME, and how to run one prompt. */
interface Agent {
  readonly name: string
  /** The upstream family behind the gateway for this agent (not its own format). */
  readonly upstream: Family
  readonly model: string
  prepare(home: string, work: string): Record<string, string>
  command(prompt: string): { readonly cmd: string; readonly args: ReadonlyArray<string> }
}

const codexConfig = (model: string, websockets: boolean) => `model = "${model}"
model_provider = "gw"
check_for_update_on_startup = false

[model_providers.gw]
name = "gateway"
base_url = "${gw.url}/v1"
env_key = "GW_API_KEY"
wire_api = "responses"
supports_websockets = ${websockets}

[features]
plugins = false

[analytics]
enabled = false
`

const AGENTS: ReadonlyArray<Agent> = [
  {
    name: "codex",
    upstream: "anthropic",
    model: "up-anthropic/claude-sonnet-4-5",
    prepare: (home) => {
      write(path.join(home, ".codex", "config.toml"), codexConfig("up-anthropic/claude-sonnet-4-5", false))
      return { HOME: home, CODEX_HOME: path.join(home, ".codex"), GW_API_KEY: KEY }
    },
    command: (prompt) => ({ cmd: bin("codex"), args: ["exec", "--skip-git-repo-check", prompt] })
  },
  {
    name: "claude",
    upstream: "gemini",
    model: "up-gemini/gemini-2.5-flash",
    prepare: (home) => {
      write(
        path.join(home, ".claude", "settings.json"),
        JSON.stringify({
          env: {
            ANTHROPIC_BASE_URL: gw.url,
            ANTHROPIC_API_KEY: KEY,
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
            DISABLE_AUTOUPDATER: "1",
            DISABLE_TELEMETRY: "1",
            DISABLE_ERROR_REPORTING: "1"
          },
          model: "up-gemini/gemini-2.5-flash",
          permissions: { allow: ["Bash"] }
        })
      )
      return { HOME: home }
    },
    command: (prompt) => ({ cmd: bin("claude"), args: ["-p", prompt] })
  },
  {
    name: "gemini",
    upstream: "openai-chat",
    model: "up-openai-chat/m1",
    prepare: (home) => {
      write(
        path.join(home, ".gemini", "settings.json"),
        JSON.stringify({
          security: { auth: { selectedType: "gemini-api-key" }, folderTrust: { enabled: false } },
          general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
          privacy: { usageStatisticsEnabled: false },
          telemetry: { enabled: false }
        })
      )
      return { HOME: home, GEMINI_API_KEY: KEY, GOOGLE_GEMINI_BASE_URL: gw.url }
    },
    command: (prompt) => ({ cmd: bin("gemini"), args: ["-m", "up-openai-chat/m1", ...(prompt.includes("USE_TOOL") ? ["--yolo"] : []), "-p", prompt] })
  },
  {
    name: "opencode",
    upstream: "ollama",
    model: "up-ollama/llama3.2",
    prepare: (home) => {
      const dir = path.join(home, ".config", "opencode")
      write(
        path.join(dir, "opencode.json"),
        JSON.stringify({
          $schema: "https://opencode.ai/config.json",
          provider: { gw: { npm: "@ai-sdk/openai-compatible", name: "Gateway", options: { baseURL: `${gw.url}/v1`, apiKey: KEY }, models: { "up-ollama/llama3.2": { name: "llama3.2 via gateway" } } } },
          model: "gw/up-ollama/llama3.2",
          small_model: "gw/up-ollama/llama3.2",
          autoupdate: false,
          share: "disabled"
        })
      )
      // Without these opencode installs its plugin package from the npm registry at start.
      fs.mkdirSync(path.join(dir, "node_modules"), { recursive: true })
      write(path.join(dir, "package-lock.json"), JSON.stringify({ packages: { "": { dependencies: { "@opencode-ai/plugin": "*" } } } }))
      return { HOME: home, OPENCODE_DISABLE_MODELS_FETCH: "1", OPENCODE_DISABLE_AUTOUPDATE: "1" }
    },
    command: (prompt) => ({ cmd: bin("opencode"), args: ["run", prompt] })
  },
  {
    name: "qwen",
    upstream: "openai-responses",
    model: "up-openai-responses/m1",
    prepare: (home) => {
      write(
        path.join(home, ".qwen", "settings.json"),
        JSON.stringify({
          security: { auth: { selectedType: "openai" } },
          model: { name: "up-openai-responses/m1" },
          general: { enableAutoUpdate: false },
          privacy: { usageStatisticsEnabled: false },
          telemetry: { enabled: false },
          memory: { enableManagedAutoMemory: false, enableManagedAutoDream: false }
        })
      )
      return {
        HOME: home,
        OPENAI_BASE_URL: `${gw.url}/v1`,
        OPENAI_API_KEY: KEY,
        OPENAI_MODEL: "up-openai-responses/m1",
        QWEN_USAGE_STATISTICS_ENABLED: "false",
        QWEN_CODE_SUPPRESS_YOLO_WARNING: "1"
      }
    },
    command: (prompt) => ({ cmd: bin("qwen"), args: [...(prompt.includes("USE_TOOL") ? ["--yolo"] : []), "-p", prompt] })
  },
  {
    name: "kilo",
    upstream: "anthropic",
    model: "up-anthropic/claude-haiku-4-5",
    prepare: (home) => {
      write(
        path.join(home, ".config", "kilo", "kilo.json"),
        JSON.stringify({
          $schema: "https://app.kilo.ai/config.json",
          provider: { gw: { npm: "@ai-sdk/openai-compatible", name: "Gateway", options: { baseURL: `${gw.url}/v1`, apiKey: KEY }, models: { "up-anthropic/claude-haiku-4-5": { name: "haiku via gateway" } } } },
          model: "gw/up-anthropic/claude-haiku-4-5",
          small_model: "gw/up-anthropic/claude-haiku-4-5",
          disabled_providers: ["kilo", "apertis"],
          autoupdate: false,
          share: "disabled"
        })
      )
      return { HOME: home, KILO_DISABLE_MODELS_FETCH: "1", KILO_TELEMETRY_LEVEL: "off", KILO_DISABLE_AUTOUPDATE: "1" }
    },
    command: (prompt) => ({ cmd: bin("kilo"), args: ["run", prompt] })
  }
]

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.script(agentResponder)
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "agents" }, { secret: KEY })))
  const connections: ReadonlyArray<[Family, Record<string, unknown>]> = [
    ["openai-chat", { provider: "openai-compatible", name: "up-openai-chat" }],
    ["openai-responses", { provider: "openai-compatible", name: "up-openai-responses", upstreamFormat: "openai-responses" }],
    ["anthropic", { provider: "anthropic", name: "up-anthropic", apiKey: "sk-ant-upstream" }],
    ["gemini", { provider: "gemini", name: "up-gemini", apiKey: "gemini-upstream" }],
    ["ollama", { provider: "ollama", name: "up-ollama" }]
  ]
  for (const [family, body] of connections) {
    const res = await call(`${gw.url}/api/providers`, { body: { ...body, baseUrl: up.baseUrl(family), defaultModel: "m1" }, headers: { authorization: `Bearer ${ADMIN}` } })
    expect(res.status).toBe(201)
  }
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

for (const agent of AGENTS) {
  describe(`${agent.name} (upstream: ${agent.upstream})`, () => {
    it.skipIf(!fs.existsSync(bin(agent.name)))("prints the upstream's answer", async () => {
      const home = tempDir(`gw-agent-${agent.name}-`)
      const work = tempDir(`gw-agent-${agent.name}-work-`)
      const env = agent.prepare(home, work)
      up.requests.length = 0
      const { cmd, args } = agent.command("say hi")
      const r = await run(cmd, args, env, work)
      expect(r.stdout, r.stderr.slice(-2000)).toContain(HELLO)
      expect(r.code).toBe(0)
      expect(up.violations).toEqual([])
      expect(up.requests.every((q) => q.family === agent.upstream)).toBe(true)
    })

    it.skipIf(!fs.existsSync(bin(agent.name)))("completes a tool call round trip", async () => {
      const home = tempDir(`gw-agent-${agent.name}-`)
      const work = tempDir(`gw-agent-${agent.name}-work-`)
      const env = agent.prepare(home, work)
      up.requests.length = 0
      const { cmd, args } = agent.command("USE_TOOL run echo")
      const r = await run(cmd, args, env, work)
      expect(r.stdout, r.stderr.slice(-2000)).toContain(SEEN)
      expect(r.stdout).toContain("TOOL_OK")
      expect(r.code).toBe(0)
      expect(up.violations).toEqual([])
    })
  })
}

describe("codex over WebSocket (upstream: openai-responses)", () => {
  it.skipIf(!fs.existsSync(bin("codex")))("prewarms, answers and completes a tool round trip on one socket", async () => {
    const home = tempDir("gw-agent-codex-ws-")
    const work = tempDir("gw-agent-codex-ws-work-")
    write(path.join(home, ".codex", "config.toml"), codexConfig("up-openai-responses/m1", true))
    const env = { HOME: home, CODEX_HOME: path.join(home, ".codex"), GW_API_KEY: KEY }
    up.requests.length = 0
    const r = await run(bin("codex"), ["exec", "--skip-git-repo-check", "USE_TOOL run echo"], env, work)
    expect(r.stdout, r.stderr.slice(-2000)).toContain(SEEN)
    expect(r.stdout).toContain("TOOL_OK")
    expect(up.violations).toEqual([])
    // Two model calls went upstream over HTTP (the prewarm never leaves the gateway).
    expect(up.requests.filter((q) => q.family === "openai-responses")).toHaveLength(2)
  })
})
