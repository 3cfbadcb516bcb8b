import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_KEY, BIN, cleanEnv, runCli, setupWithProvider } from "./support/cli.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, tempDir } from "./support/gateway.js"
import { refusedPort } from "./support/refusedPort.js"

/**
 * The operations plane from outside: a spawned gateway restarted and stopped through the API
 * while a request is in flight against a slow upstream, and the recovery and ops commands of
 * the spawned CLI on real files in a temp DATA_DIR.
 */
let up: FakeUpstream
beforeAll(async () => {
  up = await FakeUpstream.start()
})
afterAll(async () => {
  await up?.close()
})

const admin = { authorization: `Bearer ${ADMIN_KEY}` }

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port
      s.close(() => resolve(port))
    })
  })

/** Polls `check` until it answers something truthy (an observable condition), failing after `ms`. */
const until = async <A>(check: () => Promise<A | undefined | false>, ms = 15_000): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await check().catch(() => undefined)
    if (v) return v
    if (Date.now() > deadline) throw new Error("condition not met in time")
    await new Promise((r) => setImmediate(r))
  }
}

interface Spawned {
  readonly url: string
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  output(): string
}

/** `gateway --port <port>` as its own process, waiting until it answers. */
const spawnGateway = async (env: Record<string, string>): Promise<Spawned> => {
  const port = await freePort()
  const child = spawn(process.execPath, [BIN, "--port", String(port)], {
    env: cleanEnv({ LOG_FORMAT: "json", GATEWAY_API_KEY: ADMIN_KEY, ...env }),
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()))
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()))
  const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)))
  const url = `http://127.0.0.1:${port}`
  await until(async () => (await call(`${url}/api/health/ping`)).status === 200)
  return { url, child, exited, output: () => out }
}

const configured = async () => {
  const dataDir = tempDir("gw-ops-")
  const r = await setupWithProvider(dataDir, up.baseUrl("openai-chat"))
  expect(r.code).toBe(0)
  return dataDir
}

const slowChat = (url: string) =>
  call(`${url}/v1/chat/completions`, {
    body: { model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] },
    headers: admin
  })

describe("POST /api/restart and /api/shutdown (spawned gateway)", () => {
  it("restart: the in-flight request completes, then a new process answers on the same port; shutdown then exits 0", async () => {
    const dataDir = await configured()
    const gw = await spawnGateway({ DATA_DIR: dataDir, GATEWAY_ENV_FILE: path.join(dataDir, "none.env") })
    try {
      const before = await call(`${gw.url}/api/init`, { headers: admin })
      expect(before.body.pid).toBe(gw.child.pid)
      up.requests.length = 0
      up.next({ content: "slow answer", delayMs: 1500 })
      const inFlight = slowChat(gw.url)
      await until(async () => up.requests.length === 1)
      const restart = await call(`${gw.url}/api/restart`, { method: "POST", headers: admin })
      expect(restart.status).toBe(202)
      expect(restart.body).toMatchObject({ accepted: true, action: "restart", mode: "supervisor" })
      const answered = await inFlight
      expect(answered.status).toBe(200)
      expect(answered.body.choices[0].message.content).toBe("slow answer")
      const after = await until(async () => {
        const r = await call(`${gw.url}/api/init`, { headers: admin })
        return r.status === 200 && r.body.pid !== before.body.pid ? r : undefined
      })
      expect(after.body.authenticated).toBe(true)
      up.always({ content: "after restart" })
      expect((await slowChat(gw.url)).body.choices[0].message.content).toBe("after restart")

      // The restarted gateway (supervised) stops for good on shutdown: the supervisor exits 0 too.
      const stop = await call(`${gw.url}/api/shutdown`, { method: "POST", headers: admin })
      expect(stop.status).toBe(202)
      expect(await gw.exited).toBe(0)
    } finally {
      gw.child.kill("SIGKILL")
    }
  }, 60_000)

  it("shutdown: the in-flight request completes and the process exits 0", async () => {
    const dataDir = await configured()
    const gw = await spawnGateway({ DATA_DIR: dataDir, GATEWAY_ENV_FILE: path.join(dataDir, "none.env") })
    try {
      up.requests.length = 0
      up.next({ content: "last answer", delayMs: 1000 })
      const inFlight = slowChat(gw.url)
      await until(async () => up.requests.length === 1)
      const stop = await call(`${gw.url}/api/shutdown`, { method: "POST", headers: admin })
      expect(stop.status).toBe(202)
      expect(stop.body).toMatchObject({ accepted: true, action: "shutdown" })
      const answered = await inFlight
      expect(answered.status).toBe(200)
      expect(answered.body.choices[0].message.content).toBe("last answer")
      expect(await gw.exited).toBe(0)
    } finally {
      gw.child.kill("SIGKILL")
    }
  }, 60_000)
})

describe("gateway logs", () => {
  it("the server writes JSON lines to DATA_DIR/logs/gateway.log, rotated by size; logs --search and --json read them", async () => {
    const dataDir = await configured()
    const gw = await spawnGateway({
      DATA_DIR: dataDir,
      GATEWAY_LOG_FILE_MAX_MB: "0.002",
      GATEWAY_LOG_FILE_KEEP: "2",
      GATEWAY_ENV_FILE: path.join(dataDir, "none.env")
    })
    const logDir = path.join(dataDir, "logs")
    try {
      up.always({ content: "ok" })
      // Management requests are access-logged: enough of them pass the 2 KB limit several times.
      for (let i = 0; i < 40; i++) await call(`${gw.url}/api/init?marker=${i}`, { headers: admin })
      await until(async () => fs.existsSync(path.join(logDir, "gateway.log.2")))
    } finally {
      gw.child.kill("SIGTERM")
      expect(await gw.exited).toBe(0)
    }
    const files = fs.readdirSync(logDir).sort()
    expect(files).toEqual(["gateway.log", "gateway.log.1", "gateway.log.2"])
    for (const f of files) {
      const lines = fs.readFileSync(path.join(logDir, f), "utf8").trim().split("\n")
      for (const l of lines) expect(() => JSON.parse(l)).not.toThrow()
    }
    // The admin key never reaches the file.
    for (const f of files) expect(fs.readFileSync(path.join(logDir, f), "utf8")).not.toContain(ADMIN_KEY)

    const found = await runCli(["logs", "--json", "--search", "server stopped"], { DATA_DIR: dataDir })
    expect(found.code).toBe(0)
    const lines = found.stdout.trim().split("\n")
    expect(lines.length).toBeGreaterThanOrEqual(1)
    for (const l of lines) expect(JSON.parse(l).message).toContain("server stopped")
    const pretty = await runCli(["logs", "--search", "SERVER STOPPED"], { DATA_DIR: dataDir })
    expect(pretty.stdout).toMatch(/INFO\s+server stopped/)
    const none = await runCli(["logs", "--search", "no line says this"], { DATA_DIR: dataDir })
    expect(none.code).toBe(0)
    expect(none.stdout).toBe("")
  }, 60_000)

  it("logs --follow prints lines written after it started", async () => {
    const dataDir = tempDir("gw-ops-")
    const file = path.join(dataDir, "logs", "gateway.log")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, JSON.stringify({ message: "old line", logLevel: "INFO", timestamp: "t0" }) + "\n")
    const child = spawn(process.execPath, [BIN, "logs", "--follow", "--json", "--search", "wanted"], {
      env: cleanEnv({ DATA_DIR: dataDir }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    child.stdout!.on("data", (c: Buffer) => (out += c.toString()))
    try {
      // Appended until the follower prints it (it may not have opened the file yet when the first line lands).
      await until(async () => {
        fs.appendFileSync(
          file,
          JSON.stringify({ message: "wanted line", logLevel: "INFO", timestamp: "t1" }) +
            "\n" +
            JSON.stringify({ message: "other", logLevel: "INFO" }) +
            "\n"
        )
        await new Promise((r) => setTimeout(r, 50))
        return out.includes("wanted line")
      })
      expect(out).not.toContain("other")
      expect(out).not.toContain("old line")
    } finally {
      child.kill("SIGINT")
    }
  }, 30_000)
})

describe("recovery commands", () => {
  it("reset-encrypted-columns lists what a wrong storage key cannot decrypt, changes nothing, and nulls it with --force", async () => {
    const dataDir = await configured()
    const env = { DATA_DIR: dataDir, STORAGE_ENCRYPTION_KEY: "a-different-storage-key-than-the-generated-one" }
    const dry = await runCli(["reset-encrypted-columns", "--json"], env)
    expect(dry.code).toBe(0)
    const report = JSON.parse(dry.stdout)
    expect(report.undecryptable).toEqual([{ table: "connections", row: "openai-compatible", column: "api_key_enc" }])
    expect(report.reset).toBe(false)
    expect((await queryDb(dataDir, "SELECT api_key_enc FROM connections"))[0]!.api_key_enc).not.toBeNull()
    const forced = await runCli(["reset-encrypted-columns", "--force"], env)
    expect(forced.code).toBe(0)
    expect(forced.stdout).toContain("1 credential(s) nulled")
    expect((await queryDb(dataDir, "SELECT api_key_enc FROM connections"))[0]!.api_key_enc).toBeNull()
    const clean = await runCli(["reset-encrypted-columns"], env)
    expect(clean.stdout).toContain("nothing to reset")
    // With the right key (the generated file) there was never anything to reset.
    const other = await configured()
    expect(JSON.parse((await runCli(["reset-encrypted-columns", "--json"], { DATA_DIR: other })).stdout).undecryptable).toEqual([])
  }, 60_000)

  it("reset-password sets the admin password (login works with it) and --clear removes it", async () => {
    const dataDir = await configured()
    // Usage errors (exit 2): a value the API's schema refuses, and nothing to prompt on.
    const short = await runCli(["reset-password", "--password", "short"], { DATA_DIR: dataDir })
    expect(short.code).toBe(2)
    expect(short.stderr.trim()).toBe("error: --password: password must be at least 8 characters")
    const noTty = await runCli(["reset-password"], { DATA_DIR: dataDir })
    expect(noTty.code).toBe(2)
    expect(noTty.stderr).toContain("--password")
    expect((await runCli(["reset-password", "--password", "a brand new password"], { DATA_DIR: dataDir })).code).toBe(0)
    const gw = await spawnGateway({ DATA_DIR: dataDir, GATEWAY_ENV_FILE: path.join(dataDir, "none.env") })
    try {
      expect((await call(`${gw.url}/api/auth/login`, { body: { password: "a brand new password" } })).status).toBe(200)
      expect((await call(`${gw.url}/api/init`)).body.passwordSet).toBe(true)
      const cleared = await runCli(["reset-password", "--clear"], { DATA_DIR: dataDir })
      expect(cleared.stdout).toContain("admin password cleared")
      await until(async () => (await call(`${gw.url}/api/init`)).body.passwordSet === false)
    } finally {
      gw.child.kill("SIGTERM")
      await gw.exited
    }
  }, 60_000)
})

describe("config, env and health commands", () => {
  it("env set writes atomically and snapshots the previous file; show masks secrets; get answers the value", async () => {
    const dataDir = tempDir("gw-ops-")
    const envFile = path.join(dataDir, "my.env")
    const env = { DATA_DIR: dataDir, GATEWAY_ENV_FILE: envFile }
    expect((await runCli(["env", "set", "OPENAI_API_KEY", "sk-secret-value-0123456789"], env)).code).toBe(0)
    expect(fs.existsSync(path.join(dataDir, "env-backups"))).toBe(false)
    const second = await runCli(["env", "set", "LOG_LEVEL", "debug"], env)
    expect(second.code).toBe(0)
    expect(second.stdout).toContain("previous file kept as")
    const snaps = fs.readdirSync(path.join(dataDir, "env-backups"))
    expect(snaps).toHaveLength(1)
    expect(fs.readFileSync(path.join(dataDir, "env-backups", snaps[0]!), "utf8")).toBe("OPENAI_API_KEY=sk-secret-value-0123456789\n")
    expect(fs.readFileSync(envFile, "utf8")).toBe("OPENAI_API_KEY=sk-secret-value-0123456789\nLOG_LEVEL=debug\n")
    expect(fs.readdirSync(dataDir).filter((f) => f.endsWith(".tmp"))).toEqual([])
    const shown = await runCli(["env", "show"], env)
    expect(shown.stdout).toContain("OPENAI_API_KEY=****6789")
    expect(shown.stdout).toContain("LOG_LEVEL=debug")
    expect(shown.stdout).not.toContain("sk-secret-value")
    expect((await runCli(["env", "get", "LOG_LEVEL"], env)).stdout.trim()).toBe("debug")
    const missing = await runCli(["env", "get", "NOPE"], env)
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain("NOPE")
    const bad = await runCli(["env", "set", "1BAD", "x"], env)
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("<name>: not a variable name")

    // config show: the env file's values are loaded at start; secrets masked.
    const cfg = await runCli(["config", "show", "--json"], env)
    expect(cfg.code).toBe(0)
    const report = JSON.parse(cfg.stdout)
    expect(report.config.dataDir).toBe(dataDir)
    expect(report.envFile).toEqual({ path: envFile, exists: true })
    expect(report.environment.OPENAI_API_KEY).toBe("****6789")
    expect(report.environment.LOG_LEVEL).toBe("debug")
    expect(cfg.stdout).not.toContain("sk-secret-value")
    expect(report.featureFlags.length).toBeGreaterThan(0)
  })

  it("health: up with a summary and exit 0; down and exit 1 when nothing answers", async () => {
    const dataDir = await configured()
    const gw = await spawnGateway({ DATA_DIR: dataDir, GATEWAY_ENV_FILE: path.join(dataDir, "none.env") })
    try {
      const r = await runCli(["health", "--url", gw.url, "--json"], { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY })
      expect(r.code).toBe(0)
      const report = JSON.parse(r.stdout)
      expect(report).toMatchObject({ up: true, configuredCount: 1 })
      const text = await runCli(["health", "--url", gw.url], { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY })
      expect(text.stdout).toContain("providers: 1 configured")
    } finally {
      gw.child.kill("SIGTERM")
      await gw.exited
    }
    const down = await runCli(["health", "--url", `http://127.0.0.1:${await refusedPort()}`], {
      DATA_DIR: dataDir,
      GATEWAY_API_KEY: ADMIN_KEY
    })
    expect(down.code).toBe(1)
    expect(down.stdout).toContain("down")
  }, 60_000)
})
