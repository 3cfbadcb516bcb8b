import { execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { Connections } from "../src/upstream/providers/Connections.js"
import { PACKAGE_NAME, VERSION } from "../src/kernel/version.js"
import { ADMIN_KEY, BIN, cleanEnv, runCli } from "./support/cli.js"
import { FakeOpenAI } from "./support/fakeOpenAI.js"
import { startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * The commands that talk to something live: `test` (a round trip through a real gateway to a
 * fake upstream), `tunnel` (the real gateway, and a server speaking the spec's tunnel API), `update` (a fake npm registry), `completion`
 * (sourced by bash), `logs --follow` (Ctrl-C).
 */

/** A JSON server on 127.0.0.1 whose answers a test sets per `METHOD path`; requests are recorded. */
const jsonServer = async (routes: Record<string, { status?: number; body: unknown }>) => {
  const seen: Array<{ method: string; path: string; headers: http.IncomingHttpHeaders; body: string }> = []
  const server = http.createServer((req, res) => {
    let body = ""
    req.on("data", (c: Buffer) => (body += c.toString()))
    req.on("end", () => {
      seen.push({ method: req.method ?? "", path: req.url ?? "", headers: req.headers, body })
      const route = routes[`${req.method} ${req.url}`]
      res.writeHead(route?.status ?? (route ? 200 : 404), { "content-type": "application/json" })
      res.end(JSON.stringify(route?.body ?? { _tag: "NotFound", message: "no such route" }))
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    routes,
    seen,
    close: () => new Promise<void>((r) => server.close(() => r()))
  }
}

let gw: TestGateway
let upstream: FakeOpenAI
beforeAll(async () => {
  upstream = await FakeOpenAI.start()
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(
    Effect.gen(function* () {
      yield* (yield* ApiKeys).create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN_KEY })
      yield* (yield* Connections).create({ provider: "openai-compatible", name: "up", baseUrl: upstream.baseUrl, defaultModel: "m1" })
    })
  )
})
afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})

describe("gateway test", () => {
  it("sends a short chat through the running gateway and prints the model, the latency and the answer", async () => {
    upstream.always({ content: "pong" })
    const r = await runCli(["test", "--url", gw.url, "--json"], { GATEWAY_API_KEY: ADMIN_KEY })
    expect(r.code, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out).toMatchObject({ ok: true, model: "up/m1", answer: "pong", url: gw.url })
    expect(out.latencyMs).toBeTypeOf("number")
    const sent = upstream.chatRequests.at(-1)!
    expect(sent.body.messages[0].content).toContain("pong")
    expect(sent.headers.authorization).toBeUndefined()

    const text = await runCli(["test", "--url", gw.url, "--model", "up/m2", "--prompt", "say hi"], { GATEWAY_API_KEY: ADMIN_KEY })
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^ok up\/m2 in \d+ ms/)
    expect(text.stdout).toContain("pong")
    expect(upstream.chatRequests.at(-1)!.body).toMatchObject({ model: "m2", messages: [{ role: "user", content: "say hi" }] })
  }, 60_000)

  it("exits 1 and says why when the round trip fails", async () => {
    upstream.always({ status: 500 })
    try {
      const failed = await runCli(["test", "--url", gw.url, "--json"], { GATEWAY_API_KEY: ADMIN_KEY })
      expect(failed.code).toBe(1)
      expect(JSON.parse(failed.stdout)).toMatchObject({ ok: false, model: "up/m1" })
    } finally {
      upstream.always({})
    }
    const refused = await runCli(["test", "--url", gw.url], { GATEWAY_API_KEY: "gwk_not_a_key_0123456789" })
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/^FAILED .*HTTP 401/)
    const nobody = await runCli(["test", "--url", "http://127.0.0.1:1"], {})
    expect(nobody.code).toBe(1)
    expect(nobody.stderr).toContain("no gateway answers at http://127.0.0.1:1")
  }, 60_000)
})

describe("gateway tunnel", () => {
  it("against the real gateway: a token tunnel without an authtoken says why in one line and exits 1; list shows each backend", async () => {
    const r = await runCli(["tunnel", "create", "token", "--url", gw.url], { GATEWAY_API_KEY: ADMIN_KEY })
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(/^token\s+needs_auth/m)
    expect(r.stderr.trim()).toMatch(/^error: no authtoken is known: send authToken/)
    const list = await runCli(["tunnel", "list", "--url", gw.url], { GATEWAY_API_KEY: ADMIN_KEY })
    expect(list.code, list.stderr).toBe(0)
    expect(list.stdout).toMatch(/^quick\s+stopped/m)
    expect(list.stdout).toMatch(/^token\s+needs_auth/m)
    expect(list.stdout).toMatch(/^mesh\s+stopped/m)
    expect((await runCli(["tunnel", "stop", "token", "--url", gw.url], { GATEWAY_API_KEY: ADMIN_KEY })).code).toBe(0)
  }, 60_000)

  it("speaks the spec's tunnel API: status of each backend, enable with an authtoken, mesh enable, disable", async () => {
    const status = (phase: string, publicUrl: string | null = null) => ({
      phase,
      running: phase === "running",
      publicUrl,
      apiUrl: publicUrl ? `${publicUrl}/v1` : null,
      targetUrl: "http://127.0.0.1:20128",
      lastError: null
    })
    const api = await jsonServer({
      "GET /api/tunnels/quick": { body: status("running", "https://a.example") },
      "GET /api/tunnels/token": { body: status("needs_auth") },
      "GET /api/tunnels/mesh": { body: { phase: "stopped", tunnelUrl: null, apiUrl: null } },
      "POST /api/tunnels/token": { body: status("running", "https://b.example") },
      "POST /api/tunnels/mesh/enable": { body: { phase: "starting", tunnelUrl: "https://box.net.example/", apiUrl: null } },
      "POST /api/tunnels/quick": { body: status("stopped") }
    })
    try {
      const env = { GATEWAY_API_KEY: ADMIN_KEY }
      const list = await runCli(["tunnel", "list", "--url", api.url, "--json"], env)
      expect(list.code, list.stderr).toBe(0)
      expect(JSON.parse(list.stdout).tunnels.map((t: any) => [t.kind, t.phase])).toEqual([
        ["quick", "running"],
        ["token", "needs_auth"],
        ["mesh", "stopped"]
      ])
      const table = await runCli(["tunnel", "list", "--url", api.url], env)
      expect(table.stdout).toMatch(/quick\s+running\s+https:\/\/a\.example\s+https:\/\/a\.example\/v1/)
      const token = await runCli(["tunnel", "create", "token", "--auth-token", "tok-123", "--url", api.url, "--json"], env)
      expect(JSON.parse(token.stdout)).toMatchObject({ kind: "token", phase: "running", publicUrl: "https://b.example" })
      const mesh = await runCli(["tunnel", "create", "mesh", "--hostname", "box", "--port", "8080", "--wait", "0", "--url", api.url], env)
      expect(mesh.stdout).toContain("https://box.net.example/")
      expect((await runCli(["tunnel", "stop", "quick", "--url", api.url], env)).code).toBe(0)
      const posts = api.seen.filter((s) => s.method === "POST").map((s) => [s.path, JSON.parse(s.body)])
      expect(posts).toEqual([
        ["/api/tunnels/token", { action: "enable", authToken: "tok-123" }],
        ["/api/tunnels/mesh/enable", { hostname: "box", port: 8080 }],
        ["/api/tunnels/quick", { action: "disable" }]
      ])
      expect(api.seen.every((s) => s.headers.authorization === `Bearer ${ADMIN_KEY}`)).toBe(true)
    } finally {
      await api.close()
    }
  }, 90_000)
})

describe("gateway update", () => {
  const packument = (latest: string) => ({ body: { name: PACKAGE_NAME, "dist-tags": { latest }, versions: { [latest]: {} } } })

  it("says how to install a newer version (exit 1) and installs nothing; exit 0 when current", async () => {
    const registry = await jsonServer({ [`GET /${PACKAGE_NAME}`]: packument("99.0.0") })
    try {
      const env = { GATEWAY_UPDATE_REGISTRY: registry.url }
      const newer = await runCli(["update"], env)
      expect(newer.code).toBe(1)
      expect(newer.stdout).toContain(`npm install -g ${PACKAGE_NAME}@99.0.0`)
      const json = JSON.parse((await runCli(["update", "--json"], env)).stdout)
      expect(json).toEqual({
        name: PACKAGE_NAME,
        current: VERSION,
        latest: "99.0.0",
        updateAvailable: true,
        registry: registry.url,
        command: `npm install -g ${PACKAGE_NAME}@99.0.0`
      })
      expect(registry.seen[0]!.headers.accept).toContain("application/vnd.npm.install-v1+json")

      registry.routes[`GET /${PACKAGE_NAME}`] = packument(VERSION)
      const current = await runCli(["update", "--json"], env)
      expect(current.code).toBe(0)
      expect(JSON.parse(current.stdout)).toMatchObject({ current: VERSION, latest: VERSION, updateAvailable: false })
      // A prerelease of this version is older; npm's own setting is read when GATEWAY_UPDATE_REGISTRY is not set.
      registry.routes[`GET /${PACKAGE_NAME}`] = packument(`${VERSION}-rc.1`)
      const pre = await runCli(["update"], { npm_config_registry: `${registry.url}/` })
      expect(pre.code).toBe(0)
      expect(pre.stdout).toContain("is the latest version")

      delete registry.routes[`GET /${PACKAGE_NAME}`]
      const missing = await runCli(["update", "--json"], env)
      expect(missing.code).toBe(1)
      expect(JSON.parse(missing.stdout).error).toContain("is not on")
    } finally {
      await registry.close()
    }
    const down = await runCli(["update"], { GATEWAY_UPDATE_REGISTRY: "http://127.0.0.1:1" })
    expect(down.code).toBe(1)
    expect(down.stderr).toMatch(/^error: http:\/\/127\.0\.0\.1:1 cannot be read/)
  }, 90_000)
})

const sh = (shell: string, script: string) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    execFile(shell, ["-c", script], { env: cleanEnv({ GATEWAY: `${process.execPath} ${BIN}` }) }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr })
    )
  )
const has = async (shell: string) => (await sh("bash", `command -v ${shell}`)).code === 0

describe("gateway completion", () => {
  it("bash sources the script, registers it for gateway, and completes commands, subcommands and their options", async () => {
    // What bash does on <Tab>: COMP_WORDS/COMP_CWORD set, the function called with the command name.
    const complete = (words: string) =>
      `COMP_WORDS=(${words}) COMP_CWORD=${words.split(" ").length - 1} && _gateway_bash_completions gateway && echo "[\${COMPREPLY[*]}]"`
    const r = await sh(
      "bash",
      [
        "source <($GATEWAY completion bash)",
        "complete -p gateway",
        complete("gateway ke"),
        complete("gateway keys add --sc"),
        complete("gateway reset-p"),
        complete("gateway providers test-all --js")
      ].join(" && ")
    )
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/complete .*-F _gateway_bash_completions.* gateway/)
    expect(r.stdout.split("\n").filter((l) => l.startsWith("["))).toEqual(["[keys]", "[--scope]", "[reset-password]", "[--json]"])
  }, 60_000)

  it("zsh and fish scripts (run by the shell when it is installed, else read)", async () => {
    const zsh = await runCli(["completion", "zsh"])
    expect(zsh.code).toBe(0)
    expect(zsh.stdout).toMatch(/^#compdef gateway/)
    expect(zsh.stdout).toContain("keys")
    const fish = await runCli(["completion", "fish"])
    expect(fish.code).toBe(0)
    expect(fish.stdout).toContain("complete -c gateway")
    expect(fish.stdout).toContain("tunnel")
    if (await has("zsh")) expect((await sh("zsh", `autoload -U compinit && compinit -u && source <($GATEWAY completion zsh)`)).code).toBe(0)
    if (await has("fish"))
      expect((await sh("fish", `$GATEWAY completion fish | source; and complete -C "gateway ke"`)).stdout).toContain("keys")
  }, 60_000)
})

describe("gateway logs --follow", () => {
  it("prints lines as they are written, across a rotation, and stops cleanly (exit 0) on SIGINT", async () => {
    const dataDir = tempDir("gw-logs-")
    const file = path.join(dataDir, "logs", "gateway.log")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, JSON.stringify({ message: "before", logLevel: "INFO", timestamp: "t0" }) + "\n")
    const child = spawn(process.execPath, [BIN, "logs", "--follow", "--json"], {
      env: cleanEnv({ DATA_DIR: dataDir }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (c: Buffer) => (out += c.toString()))
    child.stderr.on("data", (c: Buffer) => (err += c.toString()))
    const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)))
    try {
      await until("the existing line", () => out.includes("before"))
      fs.appendFileSync(file, JSON.stringify({ message: "after one" }) + "\n")
      await until("the appended line", () => out.includes("after one"))
      // Rotation: the file moves to .1 and a new one starts.
      fs.renameSync(file, `${file}.1`)
      fs.writeFileSync(file, JSON.stringify({ message: "new file" }) + "\n")
      await until("the rotated file's first line", () => out.includes("new file"))
      expect(out.split("\n").filter((l) => l.includes("after one"))).toHaveLength(1)
    } finally {
      child.kill("SIGINT")
    }
    expect(await exited).toBe(0)
    expect(err).toBe("")
  }, 60_000)
})
