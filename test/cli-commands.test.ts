import OpenAI from "openai"
import { describe, expect, it } from "vitest"
import { VERSION } from "../src/kernel/version.js"
import { runCli, setupWithProvider, startServerProcess } from "./support/cli.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { tempDir } from "./support/gateway.js"

const fake = fakeOpenAIForFile()
const setup = (dataDir: string, extra: ReadonlyArray<string> = []) => setupWithProvider(dataDir, fake.upstream.baseUrl, extra)

describe("gateway CLI basics", () => {
  it("prints its version with --version and -v", async () => {
    for (const flag of ["--version", "-v"]) {
      const r = await runCli([flag])
      expect(r.code, flag).toBe(0)
      expect(r.stdout.trim()).toBe(VERSION)
    }
  })

  it("prints help with --help and -h, naming the subcommands", async () => {
    for (const flag of ["--help", "-h"]) {
      const r = await runCli([flag])
      expect(r.code).toBe(0)
      for (const sub of ["setup", "doctor", "providers", "keys", "status"]) expect(r.stdout).toContain(sub)
    }
  })

  it("rejects an unknown subcommand or option with a non-zero exit", async () => {
    expect((await runCli(["frobnicate"])).code).not.toBe(0)
    expect((await runCli(["keys", "add", "--scope", "root"])).code).not.toBe(0)
  })
})

describe("gateway keys", () => {
  it("adds (printing the key once), lists masked, and removes keys in the local database", async () => {
    const env = { DATA_DIR: tempDir() }
    const added = await runCli(["keys", "add", "--name", "ci", "--scope", "admin"], env)
    expect(added.code).toBe(0)
    const secret = added.stdout.trim()
    expect(secret).toMatch(/^gwk_/)
    expect(added.stderr).toContain("shown only now")
    const list = await runCli(["keys", "list"], env)
    expect(list.stdout).toContain("ci")
    expect(list.stdout).toContain(`${secret.slice(0, 8)}…${secret.slice(-4)}`)
    expect(list.stdout).not.toContain(secret)
    const json = JSON.parse((await runCli(["keys", "list", "--json"], env)).stdout)
    expect(json.keys[0]).toMatchObject({ name: "ci", scopes: ["admin"] })
    const removed = await runCli(["keys", "remove", "ci"], env)
    expect(removed.code).toBe(0)
    expect(JSON.parse((await runCli(["keys", "list", "--json"], env)).stdout).keys).toEqual([])
    const missing = await runCli(["keys", "remove", "ci"], env)
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain("no API key")
  })

  it("a key added by the CLI works against a running server that requires keys", async () => {
    const dataDir = tempDir()
    expect((await setup(dataDir)).code).toBe(0)
    const server = await startServerProcess({ DATA_DIR: dataDir, REQUIRE_API_KEY: "true" })
    try {
      const secret = (await runCli(["keys", "add", "--name", "late"], { DATA_DIR: dataDir })).stdout.trim()
      await new Promise((r) => setTimeout(r, 1200))
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: secret, maxRetries: 0 })
      const res = await client.chat.completions.create({ model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] })
      expect(res.choices[0]?.message.content).toBeTruthy()
      const denied = await new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "gwk_nope", maxRetries: 0 }).chat.completions
        .create({ model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] })
        .catch((e: { status?: number }) => e.status)
      expect(denied).toBe(401)
    } finally {
      await server.stop()
    }
  })
})

describe("gateway providers", () => {
  it("available lists and filters the catalog", async () => {
    const all = JSON.parse((await runCli(["providers", "available", "--json"])).stdout)
    expect(all.providers.length).toBeGreaterThanOrEqual(12)
    const anth = JSON.parse((await runCli(["providers", "available", "--search", "claude", "--json"])).stdout)
    expect(anth.providers.map((p: any) => p.id)).toContain("anthropic")
    const local = JSON.parse((await runCli(["providers", "available", "--category", "local", "--json"])).stdout)
    expect(local.providers.map((p: any) => p.id)).toEqual(["ollama"])
  })

  it("list, test and validate read the local database without a server", async () => {
    const dataDir = tempDir()
    expect((await setup(dataDir)).code).toBe(0)
    const list = await runCli(["providers", "list"], { DATA_DIR: dataDir })
    expect(list.stdout).toContain("openai-compatible")
    expect(list.stdout).not.toContain("sk-up")

    const test = await runCli(["providers", "test", "openai-compatible", "--json"], { DATA_DIR: dataDir })
    expect(test.code).toBe(0)
    expect(JSON.parse(test.stdout)).toMatchObject({ ok: true, modelCount: 2 })

    expect((await runCli(["providers", "validate"], { DATA_DIR: dataDir })).code).toBe(0)

    // Same database, a storage key that cannot decrypt the stored provider key.
    const wrongKey = await runCli(["providers", "validate", "--json"], { DATA_DIR: dataDir, STORAGE_ENCRYPTION_KEY: "not the key" })
    expect(wrongKey.code).toBe(1)
    expect(JSON.parse(wrongKey.stdout).connections[0].problems[0]).toContain("cannot be decrypted")

    fake.upstream.next({ status: 401, body: { error: { message: "bad key", type: "invalid_request_error", code: null } } })
    const failing = await runCli(["providers", "test-all"], { DATA_DIR: dataDir })
    expect(failing.code).toBe(1)
    expect(failing.stdout).toContain("FAILED")
  })
})

describe("gateway combo", () => {
  it("creates, lists, switches and deletes combos locally; a running server routes a combo the CLI created", async () => {
    const dataDir = tempDir()
    expect((await setup(dataDir)).code).toBe(0)
    const env = { DATA_DIR: dataDir }
    const bad = await runCli(["combo", "create", "empty", "--strategy", "priority"], env)
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain("needs at least one target")
    expect((await runCli(["combo", "create", "x", "--strategy", "fastest", "--target", "a/b"], env)).code).toBe(2)
    const server = await startServerProcess({ DATA_DIR: dataDir })
    try {
      const created = await runCli(
        ["combo", "create", "team", "--strategy", "priority", "--target", "openai-compatible/nope", "--target", "openai-compatible/m1=2"],
        env
      )
      expect(created.code, created.stderr).toBe(0)
      const listed = JSON.parse((await runCli(["combo", "list", "--json"], env)).stdout)
      expect(listed.combos[0]).toMatchObject({
        name: "team",
        strategy: "priority",
        targets: [{ model: "openai-compatible/nope" }, { model: "openai-compatible/m1", weight: 2 }]
      })
      const switched = await runCli(["combo", "switch", "team", "openai-compatible/m1"], env)
      expect(switched.stdout).toContain("primary target is now openai-compatible/m1")
      expect(JSON.parse((await runCli(["combo", "list", "--json"], env)).stdout).combos[0].targets[0].model).toBe("openai-compatible/m1")
      await new Promise((r) => setTimeout(r, 1200))
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 })
      const res = await client.chat.completions.create({ model: "team", messages: [{ role: "user", content: "hi" }] })
      expect(res.choices[0]?.message.content).toBeTruthy()
      expect((await runCli(["combo", "delete", "team"], env)).code).toBe(0)
      expect((await runCli(["combo", "delete", "team"], env)).stderr).toContain("no combo")
    } finally {
      await server.stop()
    }
  })
})
