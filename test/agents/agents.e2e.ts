import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { COMPACTION_PROMPT, summaryMessageText } from "../../src/inference/compaction/items.js"
import { maskSecret } from "../../src/kernel/redact.js"
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
    const child = spawn(command, args, {
      cwd,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NO_COLOR: "1", TERM: "dumb", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
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
  {
    name: "codex",
    upstream: "anthropic",
    model: "up-anthropic/claude-sonnet-4-5",
    command: (prompt) => ({ cmd: bin("codex"), args: ["exec", "--skip-git-repo-check", prompt] })
  },
  {
    name: "claude",
    upstream: "gemini",
    model: "up-gemini/gemini-2.5-flash",
    command: (prompt) => ({ cmd: bin("claude"), args: [...tools(prompt, "--allowedTools", "Bash"), "-p", prompt] })
  },
  // Headless Gemini CLI runs only in a trusted folder (what a user confirms on first use; its docs
  // name this variable for automated runs).
  {
    name: "gemini",
    upstream: "openai-chat",
    model: "up-openai-chat/m1",
    command: (prompt) => ({
      cmd: bin("gemini"),
      args: [...tools(prompt, "--yolo"), "-p", prompt],
      env: { GEMINI_CLI_TRUST_WORKSPACE: "true" }
    })
  },
  {
    name: "opencode",
    upstream: "ollama",
    model: "up-ollama/llama3.2",
    command: (prompt) => ({ cmd: bin("opencode"), args: ["run", prompt] })
  },
  {
    name: "qwen",
    upstream: "openai-responses",
    model: "up-openai-responses/m1",
    command: (prompt) => ({ cmd: bin("qwen"), args: [...tools(prompt, "--yolo"), "-p", prompt] })
  },
  {
    name: "kilo",
    upstream: "anthropic",
    model: "up-anthropic/claude-haiku-4-5",
    command: (prompt) => ({ cmd: bin("kilo"), args: ["run", prompt] })
  }
]

/** `gateway setup-<agent>` for real into `home`; the environment it says to set (the key it shows masked is the one we passed). */
const setUp = async (agent: Agent, home: string): Promise<Record<string, string>> => {
  const r = await runCli(
    [`setup-${agent.name}`, "--remote", gw.url, "--api-key", KEY, "--model", agent.model, "--offline", "--yes", "--json"],
    { HOME: home }
  )
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
    const res = await call(`${gw.url}/api/providers`, {
      body: { ...body, baseUrl: up.baseUrl(family), defaultModel: "m1" },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(res.status).toBe(201)
  }
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

/** The system prompt texts of an upstream request, in its family's field. */
const systemText = (family: Family | "other", body: any): string => {
  const texts = (v: unknown): string =>
    typeof v === "string"
      ? v
      : Array.isArray(v)
        ? v.map((p: any) => (typeof p === "string" ? p : (p?.text ?? texts(p?.content)))).join("\n")
        : ""
  switch (family) {
    case "openai-chat":
    case "ollama":
      return (body.messages ?? [])
        .filter((m: any) => m.role === "system" || m.role === "developer")
        .map((m: any) => texts(m.content))
        .join("\n")
    case "openai-responses":
      return [
        texts(body.instructions),
        ...(Array.isArray(body.input) ? body.input : [])
          .filter((i: any) => i.role === "system" || i.role === "developer")
          .map((i: any) => texts(i.content))
      ].join("\n")
    case "anthropic":
      return texts(body.system)
    case "gemini":
      return texts((body.systemInstruction ?? body.system_instruction)?.parts)
    default:
      return ""
  }
}

const admin = { authorization: `Bearer ${ADMIN}` }

/** Compression on for every request: the panel default, with a combo of all four engines. */
const compressEverything = async () => {
  const combo = await call(`${gw.url}/api/context/combos`, {
    body: {
      name: `agents-all-${Date.now()}`,
      engines: [{ engine: "rtk" }, { engine: "json" }, { engine: "whitespace" }, { engine: "caveman" }]
    },
    headers: admin
  })
  expect(combo.status, combo.text).toBe(201)
  const on = await call(`${gw.url}/api/settings/compression`, {
    method: "PUT",
    body: { compressByDefault: true, defaultCombo: combo.body.id },
    headers: admin
  })
  expect(on.status, on.text).toBe(200)
  return combo.body as { id: string; name: string }
}
const compressNothing = async () => {
  const off = await call(`${gw.url}/api/settings/compression`, { method: "PUT", body: {}, headers: admin })
  expect(off.status, off.text).toBe(200)
}

/** Per agent, the first upstream request of its uncompressed tool round trip (to compare the compressed one with). */
const uncompressed = new Map<string, any>()

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
      uncompressed.set(agent.name, up.requests.find((q) => q.family === agent.upstream)?.body)
    })

    it.skipIf(!fs.existsSync(bin(agent.name)))(
      "completes a tool call round trip with every request compressed (rtk, json, whitespace, caveman)",
      async () => {
        const home = tempDir(`gw-agent-${agent.name}-`)
        const work = tempDir(`gw-agent-${agent.name}-work-`)
        const env = await setUp(agent, home)
        const combo = await compressEverything()
        try {
          up.requests.length = 0
          const violations = up.violations.length
          const { cmd, args, env: runEnv } = agent.command("USE_TOOL run echo")
          const r = await run(cmd, args, { ...env, ...runEnv }, work)
          expect(r.stdout, r.stderr.slice(-2000)).toContain(SEEN)
          expect(r.stdout).toContain("TOOL_OK")
          expect(r.code).toBe(0)
          expect(up.violations.slice(violations)).toEqual([])
          const sent = up.requests.filter((q) => q.family === agent.upstream)
          // The model saw the command's output in the tool result: rtk kept `TOOL_OK` (the responder quotes the
          // tool result it got after SEEN, and the agent printed that).
          expect(r.stdout).toMatch(new RegExp(`${SEEN}[^\\n]*TOOL_OK`))
          expect(sent.some((q) => JSON.stringify(q.body).includes("TOOL_OK"))).toBe(true)
          // The requests were compressed: the system prompt the upstream got is shorter than without compression.
          const plain = uncompressed.get(agent.name)
          if (plain !== undefined) {
            const before = systemText(agent.upstream, plain)
            const after = systemText(agent.upstream, sent[0]!.body)
            console.log(`${agent.name}: system prompt upstream ${before.length} chars without compression, ${after.length} with`)
            expect(before.length).toBeGreaterThan(0)
            expect(after.length, `system prompt ${before.length} chars without compression, ${after.length} with`).toBeLessThan(
              before.length
            )
          }
          // And the gateway counted savings for this agent's model under the combo.
          const analytics = await call(`${gw.url}/api/context/analytics`, { headers: admin })
          expect(analytics.status, analytics.text).toBe(200)
          const rows = analytics.body.rows.filter((x: any) => x.combo === combo.name && x.model === agent.model)
          expect(
            rows.some((x: any) => x.engine === "caveman" && x.tokensSaved > 0),
            JSON.stringify(analytics.body.rows)
          ).toBe(true)
        } finally {
          await compressNothing()
        }
      }
    )
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

/**
 * Codex's remote compaction (docs/agents.md, "Codex compaction"): the built-in OpenAI provider pointed
 * at the gateway, with a low auto-compaction limit, compacts in the middle of a tool turn (the fake
 * model reports a large context); the gateway answers the compaction itself, through a messages-format
 * upstream, and the rest of the turn reaches that upstream with the summary in place of the transcript.
 */
describe("codex compaction with the built-in provider (upstream: anthropic)", () => {
  const SUMMARY = "COMPACTED-SUMMARY: the user asked to run echo, it printed TOOL_OK"
  /** The first line of the gateway's compaction prompt, and the opening of the message its item becomes (JSON-escaped as sent). */
  const GATEWAY_PROMPT = COMPACTION_PROMPT.split("\n")[0]!
  const OPENED = summaryMessageText("").split("\n")[0]!
  const AFTER = "ANSWER_AFTER_COMPACTION"
  it.skipIf(!fs.existsSync(bin("codex")))("completes a session that compacts", async () => {
    const home = tempDir("gw-agent-codex-compact-")
    const work = tempDir("gw-agent-codex-compact-work-")
    write(
      path.join(home, ".codex", "config.toml"),
      `model = "up-anthropic/claude-sonnet-4-5"
openai_base_url = "${gw.url}/v1"
model_auto_compact_token_limit = 2000
check_for_update_on_startup = false

[features]
plugins = false

[analytics]
enabled = false
`
    )
    const env = { HOME: home, CODEX_HOME: path.join(home, ".codex"), CODEX_API_KEY: KEY }
    up.requests.length = 0
    up.script((r) => {
      const body = JSON.stringify(r.body)
      if (body.includes(GATEWAY_PROMPT)) return { content: SUMMARY }
      if (body.includes(SUMMARY)) return { content: AFTER }
      // The tool turn reports a context far above the limit, so Codex compacts before going on.
      return { ...agentResponder(r), usage: { input: 60_000, output: 10 } }
    })
    try {
      const r = await run(bin("codex"), ["exec", "--skip-git-repo-check", "USE_TOOL run echo"], env, work)
      expect(r.stdout, r.stderr.slice(-3000)).toContain(AFTER)
      expect(r.code).toBe(0)
      expect(up.violations).toEqual([])
      const sent = up.requests.filter((q) => q.family === "anthropic").map((q) => JSON.stringify(q.body))
      // The gateway asked the upstream for the summary with its own prompt (Codex compacting locally
      // would have sent its "CONTEXT CHECKPOINT COMPACTION" prompt instead, which also asks for a
      // "handoff summary"), and the next request carried the item Codex was given opened into the
      // gateway's summary message, never the sealed item itself.
      expect(sent.some((b) => b.includes(GATEWAY_PROMPT))).toBe(true)
      expect(sent.some((b) => b.includes("CONTEXT CHECKPOINT COMPACTION"))).toBe(false)
      expect(sent.some((b) => b.includes(OPENED) && b.includes(SUMMARY) && !b.includes("gwcmp1:"))).toBe(true)
      expect(up.requests.every((q) => q.family === "anthropic")).toBe(true)
    } finally {
      up.script(agentResponder)
    }
  })
})
