/**
 * `gateway inspect` and `gateway inspect export` from outside: the built bin/gateway, spawned,
 * against a real gateway in this process (a fake upstream behind it). The tail prints the
 * buffer's last entries and requests sent after it started (as JSON lines or one text line
 * each), stops after --count or on Ctrl-C (exit 0), says why in one line when the key is
 * refused; the export writes HAR 1.2 of the buffer and a recorded session's HAR and JSONL.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { BIN, type CliResult, cleanEnv, runCli } from "./support/cli.js"
import { gatewayForFile } from "./support/families.js"
import { call, tempDir } from "./support/gateway.js"
import { until } from "./support/until.js"

const ADMIN = "gwk_cli_inspect_admin_0123456789"
const KEY = "gwk_cli_inspect_client_0123456789"
const hostsFile = path.join(tempDir("gw-cli-inspect-hosts-"), "hosts")
fs.writeFileSync(hostsFile, "127.0.0.1 localhost\n")

const ctx = gatewayForFile({
  admin: ADMIN,
  keys: [KEY],
  env: { GATEWAY_HOSTS_FILE: hostsFile, INSPECTOR_HTTP_PROXY_PORT: "0", INSPECTOR_MITM_PORT: "0" }
})
const admin = { authorization: `Bearer ${ADMIN}` }
const base = () => `${ctx.gw.url}/api/tools/traffic-inspector`
const env = () => ({ DATA_DIR: tempDir("gw-cli-inspect-"), GATEWAY_API_KEY: ADMIN })
const inspect = (args: ReadonlyArray<string>) => runCli(["inspect", ...args, "--url", ctx.gw.url], env())

const chat = (content: string) =>
  call(`${ctx.gw.url}/v1/chat/completions`, {
    body: { model: "up-chat/m1", messages: [{ role: "user", content }] },
    headers: { authorization: `Bearer ${KEY}` }
  })
const list = async (query = "") =>
  (await call(`${base()}/requests${query}`, { headers: admin })).body as { requests: Array<Record<string, any>> }
const subscribers = async () => (await call(`${base()}/capture-modes`, { headers: admin })).body.agentBridge.subscribers as number

/** The CLI as a long-running child: its output so far, and its exit. */
const children: Array<ChildProcess> = []
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL")
})
const startCli = (args: ReadonlyArray<string>) => {
  const child = spawn(process.execPath, [BIN, "inspect", ...args, "--url", ctx.gw.url], {
    env: cleanEnv(env()),
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
  const exited = new Promise<CliResult>((resolve) => child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr })))
  return { child, exited, output: () => stdout + stderr }
}

describe("gateway inspect", () => {
  it("prints the buffer's last LLM call as a JSON line, and as one text line", async () => {
    expect((await chat("first")).status).toBe(200)
    await until("the chat recorded with its tokens", async () =>
      (await list("?profile=llm&status=200")).requests.some((r) => r.llm?.tokensIn !== null)
    )
    const r = await inspect(["--json", "--count", "1", "--last", "1", "--llm"])
    expect(r.code, r.stderr).toBe(0)
    const lines = r.stdout.trim().split("\n")
    expect(lines).toHaveLength(1)
    const entry = JSON.parse(lines[0]!)
    expect(entry).toMatchObject({ source: "agent-bridge", status: 200, method: "POST", path: "/v1/chat/completions", detectedKind: "llm" })
    expect(entry.llm).toMatchObject({ model: "up-chat/m1", tokensIn: expect.any(Number), tokensOut: expect.any(Number) })

    const text = await inspect(["--count", "1", "--last", "1", "--llm"])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout.trim().split("\n")).toHaveLength(1)
    expect(text.stdout).toMatch(
      /^\d\d:\d\d:\d\d {2}agent-bridge +POST +200 +\S+\/v1\/chat\/completions +up-chat\/m1 {2}\d+\/\d+ tok {2}\S+ {2}\d+ ms\n$/
    )
  }, 60_000)

  it("tails: prints a request sent after it started, when it completes, and exits 0 after --count", async () => {
    const before = new Set((await list()).requests.map((r) => r.id as string))
    const tail = startCli(["--json", "--count", "1", "--last", "0"])
    await until("the tail connected to the feed", async () => (await subscribers()) >= 1)
    expect(tail.output()).toBe("")
    expect((await chat("sent while tailing")).status).toBe(200)
    const r = await tail.exited
    expect(r.code, r.stderr).toBe(0)
    const lines = r.stdout.trim().split("\n")
    expect(lines).toHaveLength(1)
    const entry = JSON.parse(lines[0]!)
    expect(before.has(entry.id)).toBe(false)
    // Printed once complete, with what the gateway learnt last (the usage row's tokens).
    expect(entry).toMatchObject({ source: "agent-bridge", status: 200, llm: { model: "up-chat/m1", tokensIn: expect.any(Number) } })
    expect(entry.timings.totalMs).toBeTypeOf("number")
    await until("the feed client gone", async () => (await subscribers()) === 0)
  }, 60_000)

  it("runs until Ctrl-C, then closes the socket and exits 0", async () => {
    const tail = startCli(["--last", "0", "--status", "5xx"])
    await until("the tail connected to the feed", async () => (await subscribers()) >= 1)
    // A request the filter leaves out: nothing printed.
    expect((await chat("filtered out")).status).toBe(200)
    await until("the request recorded", async () => (await list("?status=200")).requests.length > 0)
    tail.child.kill("SIGINT")
    const r = await tail.exited
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe("")
    await until("the feed client gone", async () => (await subscribers()) === 0)
  }, 60_000)

  it("a wrong key, no gateway, a bad filter: one clear line and a non-zero exit", async () => {
    const wrong = await runCli(["inspect", "--url", ctx.gw.url, "--api-key", "gwk_wrong_key_0123456789"], { DATA_DIR: tempDir() })
    expect(wrong.code).toBe(1)
    expect(wrong.stdout).toBe("")
    expect(wrong.stderr.trim().split("\n")).toHaveLength(1)
    expect(wrong.stderr).toMatch(/^error: the admin key was refused/)

    const noKey = await runCli(["inspect", "--url", ctx.gw.url], { DATA_DIR: tempDir() })
    expect(noKey.code).toBe(1)
    expect(noKey.stderr).toContain("an admin API key is needed")

    const nobody = await runCli(["inspect", "--url", "http://127.0.0.1:1", "--api-key", ADMIN], { DATA_DIR: tempDir() })
    expect(nobody.code).toBe(1)
    expect(nobody.stderr.trim()).toBe("error: no gateway answers at http://127.0.0.1:1 (is it running?)")

    const bad = await inspect(["--status", "7xx"])
    expect(bad.code).toBe(2)
    expect(bad.stderr.trim()).toBe("error: --status: must be in-flight, error, ok, failed, 2xx..5xx or a status code such as 404")
    const jsonlAlone = await inspect(["export", "--jsonl", path.join(tempDir(), "x.jsonl")])
    expect(jsonlAlone.code).toBe(2)
    expect(jsonlAlone.stderr).toContain("--jsonl: JSONL is a recorded session's export: add --session ID")
  }, 60_000)
})

describe("gateway inspect export", () => {
  it("writes the buffer as HAR 1.2, with the filters", async () => {
    expect((await chat("for the har")).status).toBe(200)
    await until("the chat recorded", async () => (await list("?profile=llm&status=200")).requests.length > 0)
    const total = (await list("?profile=llm")).requests.length
    const file = path.join(tempDir("gw-cli-inspect-har-"), "traffic.har")
    const r = await inspect(["export", "--har", file, "--llm"])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout.trim()).toBe(`wrote ${total} ${total === 1 ? "entry" : "entries"} to ${file} (HAR 1.2)`)
    const har = JSON.parse(fs.readFileSync(file, "utf8"))
    expect(har.log.version).toBe("1.2")
    expect(har.log.entries).toHaveLength(total)
    expect(
      har.log.entries.some(
        (e: { request: { url: string; method: string } }) => e.request.method === "POST" && e.request.url.endsWith("/v1/chat/completions")
      )
    ).toBe(true)
    // har-validator resolves with the document when it validates, rejects with the schema's errors otherwise.
    const validator = (await import("har-validator" as string)) as unknown as { har: (d: unknown) => Promise<unknown> }
    await expect(validator.har(har)).resolves.toEqual(har)

    // The filters go to the server: no entry from the HTTP proxy.
    const empty = path.join(tempDir("gw-cli-inspect-har-"), "none.har")
    const filtered = await inspect(["export", "--har", empty, "--source", "http-proxy", "--json"])
    expect(filtered.code, filtered.stderr).toBe(0)
    expect(JSON.parse(filtered.stdout)).toEqual({ written: [{ format: "har", file: empty, entries: 0 }] })
    expect(JSON.parse(fs.readFileSync(empty, "utf8")).log.entries).toEqual([])
  }, 60_000)

  it("exports a recorded session as HAR and JSONL (--session)", async () => {
    const started = await call(`${base()}/sessions`, { body: { name: "cli export" }, headers: admin })
    expect(started.status).toBe(201)
    const sid = started.body.id as string
    expect((await chat("in the session")).status).toBe(200)
    await until("the session's request recorded", async () => (await list(`?sessionId=${sid}`)).requests.some((r) => r.status === 200))
    const stopped = await call(`${base()}/sessions/${sid}`, { method: "PATCH", body: { action: "stop" }, headers: admin })
    expect(stopped.body).toMatchObject({ state: "saved", count: 1 })

    const dir = tempDir("gw-cli-inspect-session-")
    const harFile = path.join(dir, "session.har")
    const jsonlFile = path.join(dir, "session.jsonl")
    const r = await inspect(["export", "--session", sid, "--har", harFile, "--jsonl", jsonlFile])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout.trim().split("\n")).toEqual([`wrote 1 entry to ${harFile} (HAR 1.2)`, `wrote 1 entry to ${jsonlFile} (JSONL)`])
    const har = JSON.parse(fs.readFileSync(harFile, "utf8"))
    expect(har.log.version).toBe("1.2")
    expect(har.log.entries).toHaveLength(1)
    expect(JSON.parse(har.log.entries[0].request.postData.text).messages[0].content).toBe("in the session")
    const lines = fs.readFileSync(jsonlFile, "utf8").trim().split("\n")
    expect(lines).toHaveLength(1)
    expect(JSON.parse(lines[0]!)).toMatchObject({ source: "agent-bridge", status: 200 })

    const missing = await inspect(["export", "--session", "nope", "--har", path.join(dir, "x.har")])
    expect(missing.code).toBe(1)
    expect(missing.stderr.trim().split("\n")).toHaveLength(1)
    expect(fs.existsSync(path.join(dir, "x.har"))).toBe(false)
  }, 60_000)
})
