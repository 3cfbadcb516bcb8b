import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { AuditLog } from "../src/services/governance/AuditLog.js"
import { badHostEntries, hostAllowed } from "../src/services/plugins/sandbox/hosts.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * A skill's scripts run through the MCP tool skills_run (docs/skills.md, "Scripts"): in the
 * plugin sandbox (a process under Node's permission model, QuickJS inside), reading only the
 * skill's folder, stopped at the time limit, and without network unless
 * SKILLS_SANDBOX_NETWORK_ENABLED is on, then only to the hosts the skill's manifest names. Real
 * processes, a real HTTP server on 127.0.0.1. Needs the compiled sandbox (npm run build).
 */

const ADMIN = "gwk_skills_run_admin_key_0123456789"
const RUNNER = "gwk_skills_run_runner_key_012345678"
const OTHER = "gwk_skills_run_other_key_0123456789"
const admin = { authorization: `Bearer ${ADMIN}` }
const SLOW = { timeout: 30_000 }

let gw: TestGateway
let skillsDir: string
let target: http.Server
let other: http.Server
const hits = { target: 0, other: 0 }
const clients: Array<Client> = []
let runnerKeyId = ""

const listen = (count: () => void) =>
  new Promise<http.Server>((resolve) => {
    const server = http.createServer((req, res) => {
      count()
      const to = new URL(req.url ?? "/", "http://127.0.0.1").searchParams.get("to")
      if (to !== null) res.writeHead(302, { location: to }).end()
      else res.end("hello from the local server")
    })
    server.listen(0, "127.0.0.1", () => resolve(server))
  })
const portOf = (s: http.Server) => (s.address() as AddressInfo).port

const skillFile = (name: string, extra: string) =>
  `---\nname: "${name}"\ndescription: "${name} for tests"\n${extra}---\n\n## Overview\n\n${name}.\n`

const SCRIPTS: Record<string, string> = {
  "fetch.mjs": `const r = await fetch(process.argv[2]); console.log(r.status, await r.text())`,
  "echo.mjs": `console.log(JSON.stringify({ args: process.argv.slice(2), stdin: process.stdin })); console.error("to stderr"); process.exit(3)`,
  "read.mjs": `
const attempt = async (what, f) => { try { return what + ": " + (await f()) } catch (e) { return what + ": refused " + e.message } }
const lines = [
  await attempt("own", () => fs.readFile("data.txt")),
  await attempt("parent", () => fs.readFile("../secret.txt")),
  await attempt("absolute", () => fs.readFile(process.argv[2])),
  await attempt("link", () => fs.readFile("link.txt")),
  await attempt("import", () => import("../../secret.mjs").then((m) => m.default))
]
console.log(lines.join("\\n"))`,
  "escape.mjs": `
const F = (() => {}).constructor
const g = F("return this")()
const out = {
  require: typeof g.require,
  module: typeof g.module,
  binding: typeof (g.process && g.process.binding),
  mainModule: typeof (g.process && g.process.mainModule),
  env: typeof (g.process && g.process.env),
  ctor: typeof F("return typeof process === 'object' ? process.constructor.constructor('return globalThis.require')() : undefined")(),
  sameRealm: F("return this")() === globalThis
}
try { await F("return import('node:fs')")(); out.dynamicImport = "loaded" } catch (e) { out.dynamicImport = "refused: " + e.message }
try { out.secret = await g.fs.readFile(process.argv[2]) } catch (e) { out.secret = "refused" }
console.log(JSON.stringify(out))`,
  "loop.mjs": `while (true) {}`,
  "hog.mjs": `const kept = []; for (let i = 0; ; i++) kept.push("x".repeat(1 << 20) + i)`,
  "notes.py": `print("not JavaScript")`
}

beforeAll(async () => {
  skillsDir = tempDir("gw-skills-run-")
  target = await listen(() => hits.target++)
  other = await listen(() => hits.other++)
  fs.writeFileSync(
    path.join(skillsDir, "gw-inference.md"),
    skillFile("Inference", `allowed-hosts: "127.0.0.1:${portOf(target)}, api.example.com"\n`)
  )
  fs.writeFileSync(path.join(skillsDir, "cli-chat.md"), skillFile("Chat", ""))
  fs.writeFileSync(path.join(skillsDir, "secret.txt"), "the skills folder's secret")
  fs.writeFileSync(path.join(skillsDir, "secret.mjs"), `export default "the secret module"`)
  const folder = path.join(skillsDir, "gw-inference")
  fs.mkdirSync(path.join(folder, "scripts"), { recursive: true })
  fs.writeFileSync(path.join(folder, "data.txt"), "the skill's own data")
  fs.symlinkSync(path.join(skillsDir, "secret.txt"), path.join(folder, "link.txt"))
  for (const [name, text] of Object.entries(SCRIPTS)) fs.writeFileSync(path.join(folder, "scripts", name), text)
  gw = await startGateway({ env: { GATEWAY_SKILLS_DIR: skillsDir, GATEWAY_SKILLS_RUN_TIMEOUT_MS: "1500" } })
  await gw.run(
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      yield* keys.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })
      runnerKeyId = (yield* keys.create({ name: "runner", scopes: ["run:skills"] }, { secret: RUNNER })).id
      yield* keys.create({ name: "other", scopes: ["read:usage"] }, { secret: OTHER })
    })
  )
})
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)))
})
afterAll(async () => {
  await gw?.close()
  await new Promise((r) => target?.close(r))
  await new Promise((r) => other?.close(r))
})

const connect = async (secret = ADMIN) => {
  const client = new Client({ name: "skills-run-test", version: "1.0.0" })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${secret}` } } })
  )
  clients.push(client)
  return client
}
const text = (result: Awaited<ReturnType<Client["callTool"]>>) => (result.content as Array<{ text: string }>).map((c) => c.text).join("\n")
interface Run {
  readonly exitCode: number | null
  readonly error: string | null
  readonly stopped: string | null
  readonly stdout: string
  readonly stderr: string
  readonly durationMs: number
  readonly network: boolean
}
const run = async (client: Client, script: string, args: ReadonlyArray<string> = [], stdin?: string): Promise<Run> => {
  const result = await client.callTool({
    name: "skills_run",
    arguments: { skill: "gw-inference", script, arguments: args, ...(stdin === undefined ? {} : { stdin }) }
  })
  expect(result.isError, text(result)).toBeFalsy()
  return result.structuredContent as unknown as Run
}
const setFlag = async (value: string) => {
  const r = await call(`${gw.url}/api/settings/feature-flags`, {
    method: "PUT",
    headers: admin,
    body: { key: "SKILLS_SANDBOX_NETWORK_ENABLED", value }
  })
  expect(r.status).toBe(200)
}

describe("skills_run", () => {
  it("lists a skill's scripts in its catalog entry", async () => {
    const r = await call(`${gw.url}/api/agent-skills/gw-inference`)
    expect(r.body.scripts).toEqual(Object.keys(SCRIPTS).sort())
    expect((await call(`${gw.url}/api/agent-skills/cli-chat`)).body.scripts).toEqual([])
  })

  it(
    "a script's fetch of a local server is refused with SKILLS_SANDBOX_NETWORK_ENABLED off and reaches it with the flag on, only on a host its manifest names",
    SLOW,
    async () => {
      const client = await connect()
      const url = `http://127.0.0.1:${portOf(target)}/data`
      const off = await run(client, "fetch.mjs", [url])
      expect(off).toMatchObject({ exitCode: 1, network: false, stdout: "" })
      expect(off.error).toMatch(/the skills sandbox has no network: SKILLS_SANDBOX_NETWORK_ENABLED is off/)
      expect(hits.target).toBe(0)

      await setFlag("true")
      try {
        const on = await run(client, "fetch.mjs", [url])
        expect(on).toMatchObject({ exitCode: 0, network: true, error: null, stdout: "200 hello from the local server\n" })
        expect(hits.target).toBe(1)

        // A redirect is the script's to follow: the 302 comes back, and the host it names is not asked.
        const redirected = await run(client, "fetch.mjs", [`${url}?to=${encodeURIComponent(`http://127.0.0.1:${portOf(other)}/`)}`])
        expect(redirected).toMatchObject({ exitCode: 0, stdout: "302 \n" })
        expect(hits).toEqual({ target: 2, other: 0 })

        const elsewhere = await run(client, "fetch.mjs", [`http://127.0.0.1:${portOf(other)}/`])
        expect(elsewhere.exitCode).toBe(1)
        expect(elsewhere.error).toMatch(
          new RegExp(
            `127\\.0\\.0\\.1:${portOf(other)} is not one of the hosts this script may reach \\(127\\.0\\.0\\.1:${portOf(target)}, api\\.example\\.com\\)`
          )
        )
        expect(hits.other).toBe(0)
      } finally {
        await setFlag("false")
      }
    }
  )

  it("passes arguments and standard input, and returns stdout, stderr, the exit status and the duration", SLOW, async () => {
    const client = await connect()
    const r = await run(client, "echo.mjs", ["one", "two words"], "from stdin")
    expect(r).toMatchObject({ exitCode: 3, error: null, stopped: null, stderr: "to stderr\n" })
    expect(JSON.parse(r.stdout)).toEqual({ args: ["one", "two words"], stdin: "from stdin" })
    expect(r.durationMs).toBeGreaterThan(0)
  })

  it("a script reads its own skill's folder and nothing outside it", SLOW, async () => {
    const client = await connect()
    const outside = path.join(tempDir("gw-skills-outside-"), "outside.txt")
    fs.writeFileSync(outside, "outside the skills folder")
    const r = await run(client, "read.mjs", [outside])
    const lines = r.stdout.trim().split("\n")
    expect(lines[0]).toBe("own: the skill's own data")
    for (const line of lines.slice(1, 4)) expect(line).toMatch(/refused .*outside the script's folder/)
    expect(lines[4]).toMatch(/^import: refused .*outside the script's folder/)
    expect(r.stdout).not.toMatch(/the skills folder's secret|the secret module|outside the skills folder/)
  })

  it("a script cannot escape through the Function constructor", SLOW, async () => {
    const client = await connect()
    const r = await run(client, "escape.mjs", [path.join(skillsDir, "secret.txt")])
    expect(r.exitCode, r.error ?? "").toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out).toMatchObject({
      require: "undefined",
      module: "undefined",
      binding: "undefined",
      mainModule: "undefined",
      env: "undefined",
      ctor: "undefined",
      sameRealm: true,
      secret: "refused"
    })
    expect(out.dynamicImport).toMatch(/^refused: cannot import "node:fs": a script imports only its own files/)
  })

  it("a looping script is stopped at its time limit", SLOW, async () => {
    const client = await connect()
    const r = await run(client, "loop.mjs")
    expect(r).toMatchObject({ exitCode: null, stopped: "time" })
    expect(r.error).toMatch(/went over its time limit/)
    expect(r.durationMs).toBeGreaterThanOrEqual(1500)
    expect(r.durationMs).toBeLessThan(6_500)
  })

  it("a script that allocates without end is stopped at its memory limit", SLOW, async () => {
    const client = await connect()
    const r = await run(client, "hog.mjs")
    expect(r, r.error ?? "").toMatchObject({ exitCode: null, stopped: "memory" })
    expect(r.error).toMatch(/memory limit/)
  })

  it("bad input is a tool error that says what was wrong", SLOW, async () => {
    const client = await connect()
    const err = async (args: Record<string, unknown>) => {
      const r = await client.callTool({ name: "skills_run", arguments: args })
      expect(r.isError).toBe(true)
      return text(r)
    }
    expect(await err({ skill: "gw-nothing", script: "fetch.mjs" })).toMatch(/no agent skill 'gw-nothing'/)
    expect(await err({ skill: "cli-chat", script: "fetch.mjs" })).toMatch(/skill cli-chat has no script 'fetch.mjs' \(it has none\)/)
    expect(await err({ skill: "gw-inference", script: "../gw-inference.md" })).toMatch(
      /has no script '..\/gw-inference.md' \(its scripts: echo.mjs, escape.mjs/
    )
    expect(await err({ skill: "gw-inference", script: "notes.py" })).toMatch(/only JavaScript modules \(.js, .mjs\) run/)
    expect(await err({ skill: "gw-inference", script: "echo.mjs", arguments: [1, 2] })).toMatch(
      /invalid arguments for skills_run: .*arguments/
    )
    expect(await err({ skill: "gw-inference", script: "echo.mjs", stdin: 5 })).toMatch(/invalid arguments for skills_run: .*stdin/)
  })

  it("needs the run:skills scope: a key without it neither lists nor calls skills_run", SLOW, async () => {
    const without = await connect(OTHER)
    expect((await without.listTools()).tools.map((t) => t.name)).not.toContain("skills_run")
    const refused = await without.callTool({ name: "skills_run", arguments: { skill: "gw-inference", script: "echo.mjs" } })
    expect(refused.isError).toBe(true)
    expect(text(refused)).toMatch(/skills_run needs scope run:skills/)

    const scoped = await connect(RUNNER)
    expect((await scoped.listTools()).tools.map((t) => t.name)).toContain("skills_run")
    expect((await run(scoped, "echo.mjs", ["scoped"])).exitCode).toBe(3)
  })

  it("writes every run to the audit log: who, which script, how it ended", SLOW, async () => {
    const { entries } = await gw.run(
      Effect.gen(function* () {
        const audit = yield* AuditLog
        yield* audit.flush
        return yield* audit.query({ action: "skill.run" })
      })
    )
    const scoped = entries.find((e) => e.actor === `mcp:${runnerKeyId}`)
    expect(scoped).toMatchObject({
      target: "gw-inference/scripts/echo.mjs",
      detail: { arguments: ["scoped"], exitCode: 3, network: false }
    })
    const loop = entries.find((e) => e.target === "gw-inference/scripts/loop.mjs")
    expect(loop?.detail).toMatchObject({ stopped: "time", exitCode: null })
    const fetches = entries
      .filter((e) => e.target === "gw-inference/scripts/fetch.mjs")
      .map((e) => e.detail as { network: boolean; fetches: Array<{ allowed: boolean }> })
    expect(fetches.map((d) => [d.network, d.fetches.map((f) => f.allowed)])).toEqual(
      expect.arrayContaining([
        [false, [false]],
        [true, [true]],
        [true, [false]]
      ])
    )
    // Runs refused before they started (bad input) are not runs.
    expect(entries.some((e) => e.target?.includes("notes.py"))).toBe(false)
  })

  it("regenerating the skill keeps its allowed-hosts and leaves its folder alone", SLOW, async () => {
    const generated = await call(`${gw.url}/api/agent-skills/generate`, {
      method: "POST",
      headers: admin,
      body: { onlyIds: ["gw-inference"] }
    })
    expect(generated.body).toMatchObject({ generated: ["gw-inference"], errors: [] })
    const raw = fs.readFileSync(path.join(skillsDir, "gw-inference.md"), "utf8")
    expect(raw).toMatch(
      new RegExp(
        `^---\nname: "Inference endpoints"[^\n]*\ndescription: [^\n]*\nallowed-hosts: "127\.0\.0\.1:${portOf(target)}, api\.example\.com"\n---\n`
      )
    )
    expect((await call(`${gw.url}/api/agent-skills/gw-inference`)).body.scripts).toEqual(Object.keys(SCRIPTS).sort())
  })
})

describe("allowed-hosts", () => {
  it("matches host:port exactly, a bare host on its scheme's default port, names without case, and only http and https", () => {
    expect(hostAllowed("http://127.0.0.1:8080/x", ["127.0.0.1:8080"])).toBe(true)
    expect(hostAllowed("http://127.0.0.1:8081/x", ["127.0.0.1:8080"])).toBe(false)
    expect(hostAllowed("https://API.Example.com/v1", ["api.example.com"])).toBe(true)
    expect(hostAllowed("http://api.example.com:8443/", ["api.example.com"])).toBe(false)
    expect(hostAllowed("http://api.example.com/", ["api.example.com:80"])).toBe(true)
    expect(hostAllowed("https://api.example.com/", ["api.example.com:80"])).toBe(false)
    expect(hostAllowed("http://[::1]:9000/", ["[::1]:9000"])).toBe(true)
    expect(hostAllowed("http://localhost:9000/", ["127.0.0.1:9000"])).toBe(false)
    expect(hostAllowed("file:///etc/passwd", ["localhost"])).toBe(false)
    expect(badHostEntries(["ok.example", "a:1", "[::1]:80", "http://x", "a:99999", "a:b"])).toEqual(["http://x", "a:99999", "a:b"])
  })
})
