import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BIN, cleanEnv, type CliResult, runCli, setupWithProvider, startServerProcess } from "./support/cli.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, tempDir } from "./support/gateway.js"

/**
 * `gateway compression` and `gateway context` from outside: the built bin/gateway on a temp
 * DATA_DIR, its output and exit codes, and a running server (its own process on the same
 * database) that sees what the CLI wrote: a compression combo assigned to the model, memory
 * and skills injected into the request the upstream receives, the global switch.
 */
let up: FakeUpstream
beforeAll(async () => {
  up = await FakeUpstream.start()
  up.always({ content: "ok" })
})
afterAll(async () => {
  await up?.close()
})

/** The CLI with `input` on stdin. */
const runWithStdin = (args: ReadonlyArray<string>, env: Record<string, string>, input: string): Promise<CliResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: cleanEnv(env), stdio: ["pipe", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
    child.on("error", reject)
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
    child.stdin.end(input)
  })

/** A coding-agent turn: a long, repetitive build log sent back as a tool result. */
const buildLog = Array.from({ length: 400 }, (_, i) => `[${i}] compiling src/module${i}.ts ... ok`).join("\n")
const agentBody = (turn = "") => ({
  model: "openai-compatible/m1",
  messages: [
    { role: "user", content: `Build the project and tell me if it worked.${turn}` },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "bash", arguments: JSON.stringify({ command: "npm run build" }) } }]
    },
    { role: "tool", tool_call_id: "call_1", content: buildLog }
  ]
})
/** Each request its own text, so that no response cache answers in the upstream's place. */
let requestNo = 0
const fresh = () => ` (#${++requestNo})`

const until = async <A>(check: () => Promise<A | undefined | false>, ms = 15_000): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await check().catch(() => undefined)
    if (v) return v
    if (Date.now() > deadline) throw new Error("condition not met in time")
    await new Promise((r) => setTimeout(r, 200))
  }
}

const lastUpstreamBody = () => JSON.stringify(up.requests.at(-1)?.body ?? null)

describe("gateway compression / gateway context", () => {
  it("rejects bad input with a clear message and exit code, never a stack", async () => {
    const dataDir = tempDir("gw-cli-comp-")
    const env = { DATA_DIR: dataDir }
    const cases: Array<[ReadonlyArray<string>, number, string]> = [
      [["compression", "combos", "create", "x", "--engine", "nope"], 2, "engine must be one of: rtk, json, whitespace, caveman, summarize"],
      [["compression", "combos", "create", "x", "--engine", "caveman:{"], 2, "--engine: the settings after 'caveman:' are not JSON"],
      [["compression", "combos", "create", "x", "--engine", 'caveman:{"zzz":1}'], 2, "--engine caveman (step 1)"],
      [["compression", "combos", "delete", "ghost"], 1, "no compression combo with the id or name 'ghost'"],
      [["compression", "settings", "--window-share", "3"], 2, "--window-share: windowShare must be between 0.05 and 1"],
      [["compression", "settings", "--enable", "--disable"], 2, "contradict"],
      [["compression", "stats", "--from", "yesterday"], 2, "--from: from must be a day as YYYY-MM-DD"],
      [["compression", "preview", "--file", path.join(dataDir, "missing.json")], 2, "--file: cannot read"],
      [["compression", "preview", "--file", BIN, "--mode", "engine:caveman"], 2, "the request body is not JSON"],
      [["context", "memory", "add", "note", "--scope", "key"], 2, "--scope-id: a key entry needs the API key id"],
      [["context", "memory", "remove", "mem_nope"], 1, "no memory entry with id 'mem_nope'"],
      [["context", "skills", "add", "s", "--text", "a", "--catalog", "cli-chat"], 2, "exactly one of --catalog"],
      [["context", "skills", "add", "s", "--catalog", "no-such-skill"], 1, "no-such-skill"],
      [["context", "skills", "remove", "ghost"], 1, "no skill with the id or name 'ghost'"]
    ]
    for (const [args, code, message] of cases) {
      const r = await runCli(args, env)
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(code)
      expect(r.stderr, args.join(" ")).toContain(message)
      expect(r.stderr, args.join(" ")).not.toMatch(/\n\s+at /)
    }
  }, 120_000)

  it("preview and rtk-test read a file or stdin and report tokens before and after per engine", async () => {
    const dataDir = tempDir("gw-cli-comp-")
    const env = { DATA_DIR: dataDir }
    const bodyFile = path.join(dataDir, "body.json")
    fs.writeFileSync(bodyFile, JSON.stringify(agentBody()))
    const outFile = path.join(dataDir, "out.json")

    const text = await runCli(["compression", "preview", "--file", bodyFile, "--mode", "engine:rtk", "--output", outFile], env)
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toMatch(/^ENGINE\s+BEFORE\s+AFTER\s+SAVED/m)
    expect(text.stdout).toMatch(/^rtk\s+[\d,]+/m)
    expect(text.stdout).toContain(`compressed body written to ${outFile}`)
    const written = JSON.parse(fs.readFileSync(outFile, "utf8"))
    expect(written.messages[2].content.length).toBeLessThan(buildLog.length)

    const piped = await runWithStdin(
      ["compression", "preview", "--json", "--model", "anthropic/claude-sonnet-4"],
      env,
      JSON.stringify(agentBody())
    )
    expect(piped.code, piped.stderr).toBe(0)
    const result = JSON.parse(piped.stdout)
    expect(result.mode).toContain("default")
    expect(result.tokensAfter).toBeLessThan(result.tokensBefore)
    expect(result.engines.map((e: { engine: string }) => e.engine)).toContain("rtk")
    expect(result.body.messages[2].content).toBe(written.messages[2].content)

    const off = JSON.parse((await runCli(["compression", "preview", "--file", bodyFile, "--mode", "off", "--json"], env)).stdout)
    expect(off).toMatchObject({ mode: "off", engines: [] })
    expect(off.tokensAfter).toBe(off.tokensBefore)

    const rtk = await runWithStdin(["compression", "rtk-test", "--command", "npm run build"], env, buildLog)
    expect(rtk.code, rtk.stderr).toBe(0)
    expect(rtk.stdout.split("\n").length).toBeLessThan(400)
    expect(rtk.stderr).toMatch(/rtk: filter .*; 400 → \d+ lines/)
    const logFile = path.join(dataDir, "log.txt")
    fs.writeFileSync(logFile, buildLog)
    const rtkJson = JSON.parse((await runCli(["compression", "rtk-test", "--file", logFile, "--json"], env)).stdout)
    expect(rtkJson.linesBefore).toBe(400)
    expect(rtkJson.tokensAfter).toBeLessThan(rtkJson.tokensBefore)
  }, 120_000)

  it("a running server sees combos, assignments, settings, memory and skills the CLI writes", async () => {
    const dataDir = tempDir("gw-cli-comp-")
    expect((await setupWithProvider(dataDir, up.baseUrl("openai-chat"))).code).toBe(0)
    const env = { DATA_DIR: dataDir }
    const server = await startServerProcess(env)
    const chat = (body: { model: string; messages: Array<Record<string, unknown>> }, headers: Record<string, string> = {}) => {
      const [first, ...rest] = body.messages
      return call(`${server.url}/v1/chat/completions`, {
        body: { ...body, messages: [{ ...first, content: `${first!.content}${fresh()}` }, ...rest] },
        headers
      })
    }
    try {
      // A compression combo assigned to the model: the server compresses the tool result.
      const created = await runCli(
        ["compression", "combos", "create", "Tight", "--engine", "rtk", "--engine", "whitespace", "--description", "agents", "--json"],
        env
      )
      expect(created.code, created.stderr).toBe(0)
      const combo = JSON.parse(created.stdout)
      expect(combo).toMatchObject({ name: "Tight", description: "agents", engines: [{ engine: "rtk" }, { engine: "whitespace" }] })
      expect((await runCli(["compression", "combos", "create", "tight", "--engine", "rtk"], env)).stderr).toContain("already exists")
      const assigned = await runCli(["compression", "combos", "assign", "tight", "--model", "openai-compatible/m1"], env)
      expect(assigned.stdout).toContain("compression combo Tight applies to models openai-compatible/m1")
      const listed = await runCli(["compression", "combos", "list"], env)
      expect(listed.stdout).toMatch(/^Tight\s+ccombo_\w+\s+rtk → whitespace\s+openai-compatible\/m1\s+agents$/m)

      const compressed = await until(async () => {
        const r = await chat(agentBody())
        return r.status === 200 && (r.headers.get("x-gateway-compression") ?? "").includes("Tight") && r
      })
      expect(compressed.headers.get("x-gateway-compression")).toContain("source=")
      expect(lastUpstreamBody().length).toBeLessThan(JSON.stringify(agentBody()).length)

      // The savings reach the stats (the server writes them in the background).
      const stats = await until(async () => {
        const s = JSON.parse((await runCli(["compression", "stats", "--json"], env)).stdout)
        return s.totals.tokensSaved > 0 && s
      })
      expect(stats.byCombo.map((c: { combo: string }) => c.combo).join(",")).toContain("Tight")
      const statsText = await runCli(["compression", "stats"], env)
      expect(statsText.stdout).toMatch(/^ENGINE\s+REQUESTS/m)
      expect(statsText.stdout).toMatch(/^rtk\s+\d+/m)
      expect(statsText.stdout).toMatch(/^total: \d+ requests, [\d,]+ tokens saved/m)

      // The global switch: disabled, the server sends the tool result whole.
      const disabled = await runCli(["compression", "settings", "--disable", "--json"], env)
      expect(JSON.parse(disabled.stdout)).toMatchObject({ enabled: false })
      await until(async () => {
        const r = await chat(agentBody())
        return (
          r.status === 200 &&
          (r.headers.get("x-gateway-compression") ?? "").startsWith("off;") &&
          lastUpstreamBody().includes(JSON.stringify(buildLog).slice(1, -1))
        )
      })
      const settings = await runCli(
        [
          "compression",
          "settings",
          "--enable",
          "--active-profile",
          "engine:whitespace",
          "--auto-trigger-tokens",
          "off",
          "--window-share",
          "0.5"
        ],
        env
      )
      expect(settings.code, settings.stderr).toBe(0)
      expect(settings.stdout).toMatch(/^enabled\s+true$/m)
      expect(settings.stdout).toMatch(/^active profile\s+engine:whitespace$/m)
      expect(settings.stdout).toMatch(/^auto-trigger tokens\s+off$/m)
      expect(settings.stdout).toMatch(/^window share\s+0.5$/m)
      expect(JSON.parse((await runCli(["compression", "settings", "--no-active-profile", "--json"], env)).stdout)).toMatchObject({
        activeProfile: null,
        autoTrigger: { windowShare: 0.5 }
      })

      expect((await runCli(["compression", "combos", "assign", "tight", "--clear"], env)).stdout).toContain("assigned to nothing")
      expect((await runCli(["compression", "combos", "delete", combo.id], env)).stdout).toContain("deleted compression combo Tight")

      // Memory: injected into the system prompt of the next request; disabled, it is not.
      const note = "Repository conventions: tabs, never spaces, in Makefiles."
      const added = await runCli(["context", "memory", "add", note, "--tag", "style", "--json"], env)
      expect(added.code, added.stderr).toBe(0)
      const entry = JSON.parse(added.stdout)
      expect(entry).toMatchObject({ text: note, scope: "global", tags: ["style"], enabled: true })
      expect((await runCli(["context", "memory", "list", "--tag", "style"], env)).stdout).toContain(entry.id)
      expect(JSON.parse((await runCli(["context", "memory", "list", "--scope", "session", "--json"], env)).stdout).entries).toEqual([])
      const hello = { model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] }
      await until(async () => (await chat(hello)).status === 200 && lastUpstreamBody().includes("tabs, never spaces"))
      expect((await runCli(["context", "memory", "disable", entry.id], env)).stdout).toContain("disabled")
      await until(async () => (await chat(hello)).status === 200 && !lastUpstreamBody().includes("tabs, never spaces"))
      expect((await runCli(["context", "memory", "enable", entry.id], env)).code).toBe(0)

      // Skills: injected when the trigger's keyword is in a user turn.
      const skill = await runCli(
        ["context", "skills", "add", "deploys", "--text", "Deploy only with `make release`.", "--keyword", "deploy"],
        env
      )
      expect(skill.code, skill.stderr).toBe(0)
      expect(skill.stdout).toContain("injected on keyword:deploy")
      const catalog = await runCli(["context", "skills", "add", "chat-cli", "--catalog", "cli-chat", "--model", "nomatch/*", "--json"], env)
      expect(catalog.code, catalog.stderr).toBe(0)
      expect(JSON.parse(catalog.stdout)).toMatchObject({
        source: "catalog",
        catalogId: "cli-chat",
        trigger: { always: false, models: ["nomatch/*"] }
      })
      expect((await runCli(["context", "skills", "list"], env)).stdout).toMatch(
        /^deploys\s+skill_\w+\s+custom\s+keyword:deploy\s+yes\s+\d+$/m
      )
      const deploy = { model: "openai-compatible/m1", messages: [{ role: "user", content: "How do I deploy this?" }] }
      await until(async () => (await chat(deploy)).status === 200 && lastUpstreamBody().includes("make release"))
      expect(lastUpstreamBody()).toContain("tabs, never spaces")
      // x-gateway-no-memory skips both.
      expect((await chat(deploy, { "x-gateway-no-memory": "true" })).status).toBe(200)
      expect(lastUpstreamBody()).not.toContain("make release")
      expect(lastUpstreamBody()).not.toContain("tabs, never spaces")
      expect((await runCli(["context", "skills", "remove", "DEPLOYS"], env)).stdout).toContain("removed skill deploys")
      await until(async () => (await chat(deploy)).status === 200 && !lastUpstreamBody().includes("make release"))
      expect((await runCli(["context", "memory", "remove", entry.id], env)).stdout).toContain(`removed memory entry ${entry.id}`)
    } finally {
      await server.stop()
    }
  }, 180_000)
})
