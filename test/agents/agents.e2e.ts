import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../../src/auth/ApiKeys.js"
import { maskSecret } from "../../src/observability/redact.js"
import { runCli } from "../support/cli.js"
import { type Family, FakeUpstream } from "../support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "../support/gateway.js"
import { agentResponder, HELLO, SEEN } from "./responder.js"

/**
 * Real coding agents, run non-interactively against the gateway, each with a fake upstream of
 * a different family behind it: the agent must print the upstream's answer, and complete a
 * tool call round trip (the model asks for `echo TOOL_OK`, the agent runs it, the model sees the
 * output). Run with `npm run test:agents`, which installs the pinned agents and isolates the
 * network. Each agent is configured only by `gateway setup-<agent>` (bin/gateway: `npm run build`
 * first; run.sh does). Recipes: docs/agents.md and docs/coding-tools.md.
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

/**
 * One agent: the model `gateway setup-<agent>` makes its default, and how to run one prompt. Its
 * configuration comes only from `gateway setup-<agent> --offline`, written into a fresh HOME,
 * plus the environment that command says to set (`env` of its JSON output).
 */
interface Agent {
  readonly name: string
  /** The upstream family behind the gateway for this agent (not its own format). */
  readonly upstream: Family
  readonly model: string
  command(prompt: string): { readonly cmd: string; readonly args: ReadonlyArray<string>; readonly env?: Record<string, string> }
}

const tools = (prompt: string, ...flags: ReadonlyArray<string>) => (prompt.includes("USE_TOOL") ? flags : [])

const AGENTS: ReadonlyArray<Agent> = [
  { name: "codex", upstream: "anthropic", model: "up-anthropic/claude-sonnet-4-5", command: (prompt) => ({ cmd: bin("codex"), args: ["exec", "--skip-git-repo-check", prompt] }) },
  { name: "claude", upstream: "gemini", model: "up-gemini/gemini-2.5-flash", command: (prompt) => ({ cmd: bin("claude"), args: [...tools(prompt, "--allowedTools", "Bash"), "-p", prompt] }) },
  // Headless Gemini CLI runs only in a trusted folder (what a user confirms on first use; its docs
  // name this variable for automated runs).
  {
    name: "gemini",
    upstream: "openai-chat",
    model: "up-openai-chat/m1",
    command: (prompt) => ({ cmd: bin("gemini"), args: [...tools(prompt, "--yolo"), "-p", prompt], env: { GEMINI_CLI_TRUST_WORKSPACE: "true" } })
  },
  { name: "opencode", upstream: "ollama", model: "up-ollama/llama3.2", command: (prompt) => ({ cmd: bin("opencode"), args: ["run", prompt] }) },
  { name: "qwen", upstream: "openai-responses", model: "up-openai-responses/m1", command: (prompt) => ({ cmd: bin("qwen"), args: [...tools(prompt, "--yolo"), "-p", prompt] }) },
  { name: "kilo", upstream: "anthropic", model: "up-anthropic/claude-haiku-4-5", command: (prompt) => ({ cmd: bin("kilo"), args: ["run", prompt] }) }
]

/** `gateway setup-<agent>` for real into `home`; the environment it says to set (the key it shows masked is the one we passed). */
const setUp = async (agent: Agent, home: string): Promise<Record<string, string>> => {
  const r = await runCli([`setup-${agent.name}`, "--remote", gw.url, "--api-key", KEY, "--model", agent.model, "--offline", "--yes", "--json"], { HOME: home })
  expect(r.code, r.stderr).toBe(0)
  const out = JSON.parse(r.stdout) as { env: Record<string, string> }
  const env = Object.fromEntries(Object.entries(out.env).map(([k, v]) => [k, v === maskSecret(KEY) ? KEY : v]))
  return { HOME: home, ...env }
}

/** Codex over WebSocket needs `supports_websockets`, which setup leaves off (translated models need HTTP). */
const codexWsConfig = (model: string) => `model = "${model}"
model_provider = "gw"
check_for_update_on_startup = false

[model_providers.gw]
name = "gateway"
base_url = "${gw.url}/v1"
env_key = "GW_API_KEY"
wire_api = "responses"
supports_websockets = true

[features]
plugins = false

[analytics]
enabled = false
`

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
      const env = await setUp(agent, home)
      up.requests.length = 0
      const { cmd, args, env: runEnv } = agent.command("say hi")
      const r = await run(cmd, args, { ...env, ...runEnv }, work)
      expect(r.stdout, r.stderr.slice(-2000)).toContain(HELLO)
      expect(r.code).toBe(0)
      expect(up.violations).toEqual([])
      expect(up.requests.every((q) => q.family === agent.upstream)).toBe(true)
    })

    it.skipIf(!fs.existsSync(bin(agent.name)))("completes a tool call round trip", async () => {
      const home = tempDir(`gw-agent-${agent.name}-`)
      const work = tempDir(`gw-agent-${agent.name}-work-`)
      const env = await setUp(agent, home)
      up.requests.length = 0
      const { cmd, args, env: runEnv } = agent.command("USE_TOOL run echo")
      const r = await run(cmd, args, { ...env, ...runEnv }, work)
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
    write(path.join(home, ".codex", "config.toml"), codexWsConfig("up-openai-responses/m1"))
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
