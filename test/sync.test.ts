import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import type { BundleContent } from "../src/domain/sync.js"
import { openStorageKey, readArchive } from "../src/management/sync/Archive.js"
import { openBundle, sealBundle } from "../src/management/sync/ConfigBundle.js"
import { Secrets } from "../src/platform/store/Secrets.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { runCli } from "./support/cli.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * Cloud sync end to end: three real gateways on loopback, one the sync server (S), two clients
 * (A, B), each with its own SQLite file and storage key.
 */
const ADMIN = "gwk_sync_admin_key_0123456789abcdef01"
const admin = { authorization: `Bearer ${ADMIN}` }
const PASSPHRASE = "correct horse battery staple"
const PROVIDER_SECRET = "sk-provider-secret-b-4c9f1e2d7a"

let S: TestGateway
let A: TestGateway
let B: TestGateway
let up: FakeUpstream

const api = (gw: TestGateway, p: string, init: { method?: string; body?: unknown } = {}) =>
  call(`${gw.url}${p}`, { ...init, headers: admin })

/** Everything sync carries, as the management API shows it (traffic-driven fields left out). */
const config = async (gw: TestGateway) => ({
  providers: (await api(gw, "/api/providers")).body.connections.map(
    ({ lastUsedAt: _a, updatedAt: _b, testStatus: _c, lastTestedAt: _d, ...c }: any) => c
  ),
  keys: (await api(gw, "/api/keys")).body.keys.map(({ lastUsedAt: _, ...k }: any) => k),
  combos: (await api(gw, "/api/combos")).body.combos,
  flags: (await api(gw, "/api/settings/feature-flags")).body.flags
    .filter((f: any) => f.source === "db")
    .map((f: any) => [f.key, f.effectiveValue]),
  aliases: (await api(gw, "/api/models/alias")).body.aliases.filter((a: any) => a.source === "user")
})

const chat = (gw: TestGateway, model: string, key: string) =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model, messages: [{ role: "user", content: "hi" }] },
    headers: { authorization: `Bearer ${key}` }
  })

const init = (gw: TestGateway, overrides: Record<string, unknown> = {}) =>
  api(gw, "/api/sync/initialize", { body: { serverUrl: S.url, apiKey: ADMIN, space: "team", passphrase: PASSPHRASE, ...overrides } })
const action = (gw: TestGateway, body: Record<string, unknown>) => api(gw, "/api/sync/cloud", { body })

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.always({ content: "from the synced provider" })
  ;[S, A, B] = await Promise.all([startGateway(), startGateway(), startGateway()])
  for (const gw of [S, A, B])
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})
afterAll(async () => {
  await Promise.all([S?.close(), A?.close(), B?.close()])
  await up?.close()
})

let clientKey = ""

describe("cloud sync between two gateways through a third", () => {
  it("B pushes its providers, keys, combos, flags and aliases; the server holds only ciphertext", async () => {
    expect(
      (
        await api(B, "/api/providers", {
          body: {
            provider: "openai-compatible",
            name: "shared",
            baseUrl: up.baseUrl("openai-chat"),
            apiKey: PROVIDER_SECRET,
            defaultModel: "m1",
            models: ["m1"]
          }
        })
      ).status
    ).toBe(201)
    const key = await api(B, "/api/keys", { body: { name: "client" } })
    expect(key.status).toBe(201)
    clientKey = key.body.secret ?? key.body.key
    expect((await api(B, "/api/combos", { body: { name: "pair", strategy: "priority", targets: [{ model: "shared/m1" }] } })).status).toBe(
      201
    )
    expect((await api(B, "/api/settings/feature-flags", { method: "PUT", body: { key: "TOOL_POLICY_MODE", value: "block" } })).status).toBe(
      200
    )
    expect((await api(B, "/api/models/alias", { body: { alias: "fast", target: "pair" } })).status).toBe(200)

    const status = await init(B)
    expect(status.status).toBe(200)
    expect(status.body).toMatchObject({ configured: true, serverUrl: S.url, space: "team", localVersion: 0, remoteVersion: 0 })
    expect(JSON.stringify(status.body)).not.toContain(PASSPHRASE)

    const pushed = await action(B, { action: "push" })
    expect(pushed.status).toBe(200)
    expect(pushed.body).toMatchObject({ action: "push", result: "pushed", version: 1 })
    expect(pushed.body.counts).toMatchObject({ connections: 1, combos: 1, flags: 1 })

    const stored = await api(S, "/api/cloud/bundles/team")
    expect(stored.status).toBe(200)
    expect(stored.body.version).toBe(1)
    for (const plain of [PROVIDER_SECRET, "shared", "TOOL_POLICY_MODE", "pair", PASSPHRASE])
      expect(stored.body.ciphertext).not.toContain(plain)
    expect(stored.body.ciphertext).toMatch(/^gwenc1\./)
    // Nor anywhere in the server's database file, nor in B's (key and passphrase encrypted at rest).
    expect(fs.readFileSync(path.join(S.dataDir, "gateway.db")).includes(PROVIDER_SECRET)).toBe(false)
    const bDb = fs.readFileSync(path.join(B.dataDir, "gateway.db"))
    expect(bDb.includes(PASSPHRASE)).toBe(false)
    expect((await api(S, "/api/cloud/bundles/team/versions")).body).toMatchObject({ space: "team", current: 1, versions: [{ version: 1 }] })
  })

  it("a wrong passphrase is a 400 that says so, and A stays unconfigured", async () => {
    const before = await config(A)
    const wrong = await init(A, { passphrase: "not the passphrase" })
    expect(wrong.status).toBe(400)
    expect(wrong.body.message).toMatch(/wrong passphrase/)
    expect((await api(A, "/api/sync/cloud")).body.configured).toBe(false)
    expect(await config(A)).toEqual(before)
  })

  it("A pulls and then has B's configuration, the provider's key re-encrypted with A's own storage key", async () => {
    expect((await init(A)).status).toBe(200)
    const status = (await api(A, "/api/sync/cloud")).body
    expect(status).toMatchObject({ configured: true, localVersion: 0, remoteVersion: 1, localChanged: false })
    const pulled = await action(A, { action: "pull" })
    expect(pulled.status).toBe(200)
    expect(pulled.body).toMatchObject({ result: "pulled", version: 1 })
    expect(await config(A)).toEqual(await config(B))
    // The synced key and provider serve on A, so the provider secret decrypted there.
    const answer = await chat(A, "fast", clientKey)
    expect(answer.status).toBe(200)
    expect(answer.body.choices[0].message.content).toBe("from the synced provider")
    expect(up.requests.at(-1)!.headers["authorization"]).toBe(`Bearer ${PROVIDER_SECRET}`)
    expect(fs.readFileSync(path.join(A.dataDir, "gateway.db")).includes(PROVIDER_SECRET)).toBe(false)
    expect((await api(A, "/api/sync/cloud")).body).toMatchObject({ localVersion: 1, remoteVersion: 1, localChanged: false })
  })

  it("a change on B reaches A with sync (push on B, pull on A)", async () => {
    expect(
      (await api(B, "/api/combos", { body: { name: "second", strategy: "priority", targets: [{ model: "shared/m1" }] } })).status
    ).toBe(201)
    expect(
      (await api(B, "/api/settings/feature-flags", { method: "PUT", body: { key: "MODEL_ALIAS_COMPAT_ENABLED", value: "true" } })).status
    ).toBe(200)
    expect((await action(B, { action: "sync" })).body).toMatchObject({ result: "pushed", version: 2 })
    expect((await action(A, { action: "sync" })).body).toMatchObject({ result: "pulled", version: 2 })
    expect(await config(A)).toEqual(await config(B))
    expect((await action(A, { action: "sync" })).body).toMatchObject({ result: "up-to-date", version: 2 })
  })

  it("both sides changed: 409 with a report per section; a forced pull resolves it", async () => {
    expect((await api(A, "/api/models/alias", { body: { alias: "only-on-a", target: "pair" } })).status).toBe(200)
    expect((await api(B, "/api/settings/feature-flags", { method: "PUT", body: { key: "TOOL_POLICY_MODE", value: "warn" } })).status).toBe(
      200
    )
    expect((await action(B, { action: "push" })).body).toMatchObject({ result: "pushed", version: 3 })

    const refused = await action(A, { action: "sync" })
    expect(refused.status).toBe(409)
    expect(refused.body._tag).toBe("SyncConflict")
    expect(refused.body.report).toMatchObject({ baseVersion: 2, remoteVersion: 3, localChanged: true, remoteChanged: true })
    expect(refused.body.report.sections).toEqual(
      expect.arrayContaining([
        { section: "flags", onlyLocal: [], onlyRemote: [], changed: ["TOOL_POLICY_MODE"] },
        { section: "settings", onlyLocal: ["model_alias/only-on-a"], onlyRemote: [], changed: [] }
      ])
    )
    expect((await action(A, { action: "push" })).status).toBe(409)
    expect((await action(A, { action: "pull" })).status).toBe(409)
    const status = (await api(A, "/api/sync/cloud")).body
    expect(status).toMatchObject({ localVersion: 2, remoteVersion: 3, localChanged: true })
    expect(status.lastConflict.sections.map((s: any) => s.section)).toEqual(["flags", "settings"])
    // Nothing changed on either side by the refusals.
    expect((await api(A, "/api/models/alias")).body.aliases.some((a: any) => a.alias === "only-on-a")).toBe(true)
    expect((await api(S, "/api/cloud/bundles/team/versions")).body.current).toBe(3)

    expect((await action(A, { action: "pull", force: true })).body).toMatchObject({ result: "pulled", version: 3 })
    expect(await config(A)).toEqual(await config(B))
    expect((await api(A, "/api/sync/cloud")).body).toMatchObject({ localVersion: 3, localChanged: false })
  })

  it("a forced push replaces the server's bundle", async () => {
    expect((await api(A, "/api/models/alias", { body: { alias: "from-a", target: "pair" } })).status).toBe(200)
    expect((await api(B, "/api/models/alias", { body: { alias: "from-b", target: "pair" } })).status).toBe(200)
    expect((await action(B, { action: "push" })).body.version).toBe(4)
    expect((await action(A, { action: "push" })).status).toBe(409)
    expect((await action(A, { action: "push", force: true })).body).toMatchObject({ result: "pushed", version: 5 })
    expect((await action(B, { action: "pull", force: true })).body).toMatchObject({ result: "pulled", version: 5 })
    expect(await config(B)).toEqual(await config(A))
  })

  it("the server refuses a bundle not based on its current version, naming that version", async () => {
    const stale = await api(S, "/api/cloud/bundles/team", { method: "PUT", body: { baseVersion: 1, ciphertext: "gwenc1.x.y" } })
    expect(stale.status).toBe(409)
    expect(stale.body).toMatchObject({ _tag: "VersionConflict", currentVersion: 5 })
    expect((await api(S, "/api/cloud/bundles/nobody")).status).toBe(404)
    expect((await api(S, "/api/cloud/bundles/bad%20space")).status).toBe(400)
    expect((await call(`${S.url}/api/cloud/bundles/team`)).status).toBe(401)
  })

  it("bad input names the field; an unusable server or key is a 400 and changes nothing", async () => {
    const missing = await api(A, "/api/sync/initialize", { body: { serverUrl: S.url, apiKey: ADMIN, space: "team" } })
    expect(missing.status).toBe(400)
    expect(missing.body.message).toMatch(/passphrase/)
    const badUrl = await init(A, { serverUrl: "ftp://example" })
    expect(badUrl.status).toBe(400)
    expect(badUrl.body.message).toMatch(/serverUrl/)
    expect((await action(A, { action: "merge" })).status).toBe(400)
    const badKey = await init(A, { apiKey: "gwk_not_a_key_of_the_server_000000" })
    expect(badKey.status).toBe(400)
    expect(badKey.body.message).toMatch(/refused/)
    expect((await api(A, "/api/sync/cloud")).body).toMatchObject({ configured: true, space: "team", localVersion: 5 })
  })

  it("disconnect forgets the server; actions then say how to set it up", async () => {
    expect((await api(A, "/api/sync/cloud", { method: "DELETE" })).body).toEqual({ disconnected: true })
    expect((await api(A, "/api/sync/cloud")).body.configured).toBe(false)
    const none = await action(A, { action: "push" })
    expect(none.status).toBe(400)
    expect(none.body.message).toMatch(/initialize/)
  })
})

describe("exportAll archive and multipart import", () => {
  const download = async (gw: TestGateway, query = "", headers: Record<string, string> = {}) => {
    const res = await fetch(`${gw.url}/api/db-backups/exportAll${query}`, { headers: { ...admin, ...headers } })
    return {
      status: res.status,
      type: res.headers.get("content-type"),
      disposition: res.headers.get("content-disposition"),
      bytes: Buffer.from(await res.arrayBuffer())
    }
  }
  const unpack = async (bytes: Buffer) => {
    const dir = fs.mkdtempSync(path.join(B.dataDir, "unpack-"))
    const file = path.join(dir, "archive.tar.gz")
    fs.writeFileSync(file, bytes)
    const read = await readArchive(file, dir, ["manifest.json", "config.json", "storage-key.enc"])
    const text = (name: string) => (read.files[name] ? fs.readFileSync(read.files[name]!, "utf8") : undefined)
    return { names: read.names, text, raw: zlib.gunzipSync(bytes) }
  }
  const importForm = async (gw: TestGateway, bytes: Uint8Array | undefined, fieldName = "file") => {
    const form = new FormData()
    if (bytes) form.append(fieldName, new Blob([bytes]), "upload.bin")
    else form.append("note", "no file")
    const res = await fetch(`${gw.url}/api/db-backups/import`, { method: "POST", headers: admin, body: form })
    return { status: res.status, body: (await res.json()) as any }
  }

  it("without the key: the database, the configuration and a manifest; secrets only as stored", async () => {
    const got = await download(B)
    expect(got.status).toBe(200)
    expect(got.type).toBe("application/gzip")
    expect(got.disposition).toMatch(/attachment; filename="gateway-.*\.tar\.gz"/)
    const archive = await unpack(got.bytes)
    expect(archive.names).toEqual(["manifest.json", "gateway.db", "config.json"])
    expect(JSON.parse(archive.text("manifest.json")!)).toMatchObject({ format: "gateway-archive", includesKey: false })
    const config = JSON.parse(archive.text("config.json")!)
    expect(config.sections.connections[0]).toMatchObject({ name: "shared" })
    expect(config.sections.connections[0].api_key_enc).toMatch(/^v1:/)
    expect(archive.raw.includes(PROVIDER_SECRET)).toBe(false)
  })

  it("with the key: refused without a passphrase or with one in the URL; sealed with the header's passphrase", async () => {
    const none = await download(B, "?includeKey=true")
    expect(none.status).toBe(400)
    expect(JSON.parse(none.bytes.toString()).message).toMatch(/X-Export-Passphrase/)
    const inUrl = await download(B, "?includeKey=true&passphrase=secret-pass-123")
    expect(inUrl.status).toBe(400)
    expect(JSON.parse(inUrl.bytes.toString()).message).toMatch(/^passphrase: /)

    const got = await download(B, "?includeKey=true", { "x-export-passphrase": "export pass 123" })
    expect(got.status).toBe(200)
    const archive = await unpack(got.bytes)
    expect(archive.names).toEqual(["manifest.json", "gateway.db", "config.json", "storage-key.enc"])
    const keyHex = fs.readFileSync(path.join(B.dataDir, "storage.key"), "utf8").trim()
    expect(archive.raw.includes(keyHex)).toBe(false)
    expect(await Effect.runPromise(openStorageKey(archive.text("storage-key.enc")!, "export pass 123"))).toBe(keyHex)
    const wrong = await Effect.runPromise(Effect.flip(openStorageKey(archive.text("storage-key.enc")!, "another pass")))
    expect(wrong.message).toMatch(/wrong passphrase/)
  })

  it("an archive uploaded as multipart restores the state it was taken in", async () => {
    const before = await config(B)
    const got = await download(B)
    expect(
      (await api(B, "/api/combos", { body: { name: "after-export", strategy: "priority", targets: [{ model: "shared/m1" }] } })).status
    ).toBe(201)
    expect(await config(B)).not.toEqual(before)
    const restored = await importForm(B, got.bytes)
    expect(restored.status).toBe(200)
    expect(restored.body.safetyBackup.kind).toBe("pre-restore")
    expect(await config(B)).toEqual(before)
  })

  it("a corrupt upload, multipart or raw, is a 400 and changes nothing", async () => {
    const before = await config(B)
    const backupsBefore = (await api(B, "/api/db-backups")).body.backups.length
    const corrupt = await importForm(B, new TextEncoder().encode("SQLite format 3\u0000 but not really a database at all"))
    expect(corrupt.status).toBe(400)
    expect(corrupt.body.message).toMatch(/cannot restore/)
    const noFile = await importForm(B, undefined)
    expect(noFile.status).toBe(400)
    expect(noFile.body.message).toMatch(/^file: /)
    const badArchive = await fetch(`${B.url}/api/db-backups/import`, {
      method: "POST",
      headers: { ...admin, "content-type": "application/gzip" },
      body: zlib.gzipSync(Buffer.from("not a tar"))
    })
    expect(badArchive.status).toBe(400)
    expect(((await badArchive.json()) as any).message).toMatch(/archive/)
    expect(await config(B)).toEqual(before)
    expect((await api(B, "/api/db-backups")).body.backups.length).toBe(backupsBefore)
  })
})

describe("gateway restore <archive>", () => {
  it("restores the database and, with --passphrase, the storage key into a fresh DATA_DIR, where the synced provider then serves", async () => {
    const res = await fetch(`${B.url}/api/db-backups/exportAll?includeKey=true`, {
      headers: { ...admin, "x-export-passphrase": "export pass 123" }
    })
    expect(res.status).toBe(200)
    const dataDir = tempDir()
    const archive = path.join(dataDir, "export.tar.gz")
    fs.writeFileSync(archive, Buffer.from(await res.arrayBuffer()))

    const wrong = await runCli(["restore", archive, "--passphrase", "not it at all"], { DATA_DIR: dataDir })
    expect(wrong.code).not.toBe(0)
    expect(wrong.stderr).toMatch(/wrong passphrase/)
    expect(fs.readdirSync(path.join(dataDir, "backups")).filter((n) => n.endsWith(".db"))).toEqual([])

    const restored = await runCli(["restore", archive, "--passphrase", "export pass 123"], { DATA_DIR: dataDir })
    expect(restored.code).toBe(0)
    expect(restored.stdout).toMatch(/storage key restored/)
    expect(fs.readFileSync(path.join(dataDir, "storage.key"), "utf8").trim()).toBe(
      fs.readFileSync(path.join(B.dataDir, "storage.key"), "utf8").trim()
    )

    const C = await startGateway({ dataDir })
    try {
      const answer = await chat(C, "fast", clientKey)
      expect(answer.status).toBe(200)
      expect(up.requests.at(-1)!.headers["authorization"]).toBe(`Bearer ${PROVIDER_SECRET}`)
    } finally {
      await C.close()
    }
  })
})

describe("compression and context configuration in the bundle (schema 2)", () => {
  /** C makes the configuration, D is a fresh gateway that takes it; both sync through S, space `context`. */
  let C: TestGateway
  let D: TestGateway
  const SPACE = "context"
  const PRETTY = JSON.stringify(
    {
      files: [
        { name: "a.ts", size: 120 },
        { name: "b.ts", size: 98 }
      ]
    },
    null,
    2
  )
  const MINIFIED = JSON.stringify(JSON.parse(PRETTY))

  const initSpace = (gw: TestGateway) =>
    api(gw, "/api/sync/initialize", { body: { serverUrl: S.url, apiKey: ADMIN, space: SPACE, passphrase: PASSPHRASE } })
  /** The space's latest bundle, opened as a receiver would. */
  const latestBundle = async () => {
    const stored = await api(S, `/api/cloud/bundles/${SPACE}`)
    expect(stored.status).toBe(200)
    return { version: stored.body.version as number, content: await Effect.runPromise(openBundle(stored.body.ciphertext, PASSPHRASE)) }
  }
  /** Compression combos (with their assignments), memory and skills as the management API shows them. */
  const context = async (gw: TestGateway) => ({
    combos: (await api(gw, "/api/context/combos")).body.combos,
    memory: (await api(gw, "/api/context/memory")).body.entries,
    skills: (await api(gw, "/api/context/skills")).body.skills
  })
  /** A chat through the synced provider: what the upstream got, and the compression the gateway chose. */
  const chatVia = async (gw: TestGateway) => {
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: {
        model: "ctx/m1",
        messages: [
          { role: "system", content: "You are a coding agent." },
          { role: "user", content: "List the files." },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "call_1", type: "function", function: { name: "list_files", arguments: "{}" } }]
          },
          { role: "tool", tool_call_id: "call_1", content: PRETTY },
          { role: "user", content: "Which is larger?" }
        ]
      },
      headers: admin
    })
    expect(res.status, res.text).toBe(200)
    const sent = up.requests.at(-1)!.body as any
    return {
      system: sent.messages
        .filter((m: any) => m.role === "system")
        .map((m: any) => m.content)
        .join("\n"),
      tool: sent.messages.find((m: any) => m.role === "tool").content,
      mode: res.headers.get("x-gateway-compression")
    }
  }

  beforeAll(async () => {
    ;[C, D] = await Promise.all([startGateway(), startGateway()])
    for (const gw of [C, D]) await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  })
  afterAll(async () => {
    await Promise.all([C?.close(), D?.close()])
  })

  it("a bundle carries compression combos, assignments, memory and skills; a fresh gateway that pulls it serves with them at once", async () => {
    expect(
      (
        await api(C, "/api/providers", {
          body: { provider: "openai-compatible", name: "ctx", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1", models: ["m1"] }
        })
      ).status
    ).toBe(201)
    const combo = await api(C, "/api/context/combos", { body: { name: "tight", engines: [{ engine: "json" }] } })
    expect(combo.status, combo.text).toBe(201)
    expect((await api(C, `/api/context/combos/${combo.body.id}/assignments`, { method: "PUT", body: { models: ["ctx/m1"] } })).status).toBe(
      200
    )
    expect((await api(C, "/api/context/memory", { body: { text: "The repository uses pnpm.", tags: ["repo"] } })).status).toBe(201)
    expect(
      (await api(C, "/api/context/skills", { body: { name: "style", text: "Answer in short sentences.", trigger: { always: true } } }))
        .status
    ).toBe(201)
    const onC = await chatVia(C)
    expect(onC).toMatchObject({ tool: MINIFIED, mode: "tight; source=routing-override" })

    expect((await initSpace(C)).status).toBe(200)
    expect((await action(C, { action: "push" })).body).toMatchObject({
      result: "pushed",
      version: 1,
      counts: { compressionCombos: 1, compressionAssignments: 1, memory: 1, skills: 1 }
    })
    const { content } = await latestBundle()
    expect(content.schema).toBe(2)
    expect(content.sections.compressionCombos).toEqual([expect.objectContaining({ id: combo.body.id, name: "tight" })])
    expect(content.sections.compressionAssignments).toEqual([
      expect.objectContaining({ kind: "model", target: "ctx/m1", combo_id: combo.body.id })
    ])
    expect(content.sections.memory).toEqual([expect.objectContaining({ text: "The repository uses pnpm.", scope: "global" })])
    expect(content.sections.skills).toEqual([expect.objectContaining({ name: "style", text: "Answer in short sentences." })])

    // D has read its (empty) context snapshot before the pull: the pull must make it reload.
    expect(await context(D)).toEqual({ combos: [], memory: [], skills: [] })
    expect((await initSpace(D)).status).toBe(200)
    expect((await action(D, { action: "pull" })).body).toMatchObject({
      result: "pulled",
      version: 1,
      counts: { compressionCombos: 1, memory: 1, skills: 1 }
    })
    expect(await context(D)).toEqual(await context(C))
    expect((await context(D)).combos[0]).toMatchObject({ name: "tight", assignments: { models: ["ctx/m1"], routingCombos: [] } })
    // In effect on D's request path, no restart: the model's compression combo, the memory entry, the skill.
    const onD = await chatVia(D)
    expect(onD).toMatchObject({ tool: MINIFIED, mode: "tight; source=routing-override" })
    expect(onD.system).toContain("The repository uses pnpm.")
    expect(onD.system).toContain("Answer in short sentences.")
    expect((await api(D, "/api/sync/cloud")).body).toMatchObject({ localVersion: 1, localChanged: false })
  })

  it("a skill edited on both sides is reported as changed in the skills section", async () => {
    const skillOn = async (gw: TestGateway) => (await context(gw)).skills.find((s: any) => s.name === "style")
    expect(
      (await api(C, `/api/context/skills/${(await skillOn(C)).id}`, { method: "PUT", body: { text: "Answer in one sentence." } })).status
    ).toBe(200)
    expect((await action(C, { action: "sync" })).body).toMatchObject({ result: "pushed", version: 2 })
    expect(
      (await api(D, `/api/context/skills/${(await skillOn(D)).id}`, { method: "PUT", body: { text: "Answer at length." } })).status
    ).toBe(200)
    expect((await api(D, "/api/sync/cloud")).body).toMatchObject({ localChanged: true })

    const refused = await action(D, { action: "sync" })
    expect(refused.status).toBe(409)
    expect(refused.body.report.sections).toEqual([{ section: "skills", onlyLocal: [], onlyRemote: [], changed: ["style"] }])
    expect((await action(D, { action: "pull", force: true })).body).toMatchObject({ result: "pulled", version: 2 })
    expect((await skillOn(D)).text).toBe("Answer in one sentence.")
    expect((await chatVia(D)).system).toContain("Answer in one sentence.")
  })

  it("a schema-1 bundle (an older gateway's) is read, and leaves the receiver's compression and context as they were", async () => {
    expect((await api(D, "/api/context/memory", { body: { text: "Only D knows this.", scope: "session", scopeId: "s-1" } })).status).toBe(
      201
    )
    const before = await context(D)
    expect(before.memory).toHaveLength(2)

    // What a gateway before schema 2 made: the same configuration without the four sections, and one flag more.
    const { version, content } = await latestBundle()
    const { compressionCombos, compressionAssignments, memory, skills, ...older } = content.sections
    for (const section of [compressionCombos, compressionAssignments, memory, skills]) expect(section?.length).toBeGreaterThan(0)
    const schema1: BundleContent = {
      ...content,
      schema: 1,
      sections: { ...older, flags: [...older.flags, { namespace: "feature_flags", key: "TOOL_POLICY_MODE", value: "warn" }] }
    }
    const put = await api(S, `/api/cloud/bundles/${SPACE}`, {
      method: "PUT",
      body: { baseVersion: version, ciphertext: sealBundle(schema1, PASSPHRASE) }
    })
    expect(put.status, put.text).toBe(201)

    // D changed (its own memory entry) and so did the space: a conflict, whose report compares only what both carry.
    const refused = await action(D, { action: "sync" })
    expect(refused.status).toBe(409)
    expect(refused.body.report.sections).toEqual([{ section: "flags", onlyLocal: [], onlyRemote: ["TOOL_POLICY_MODE"], changed: [] }])

    const pulled = await action(D, { action: "pull", force: true })
    expect(pulled.status, pulled.text).toBe(200)
    expect(pulled.body).toMatchObject({ result: "pulled", version: version + 1 })
    expect(Object.keys(pulled.body.counts)).not.toContain("memory")
    // The bundle was imported (its flag is live) ...
    const flags = (await api(D, "/api/settings/feature-flags")).body.flags
    expect(flags.find((f: any) => f.key === "TOOL_POLICY_MODE")).toMatchObject({ source: "db", effectiveValue: "warn" })
    // ... and D's compression combos, assignments, memory (its own entry too) and skills are untouched, and still in effect.
    expect(await context(D)).toEqual(before)
    const onD = await chatVia(D)
    expect(onD).toMatchObject({ tool: MINIFIED, mode: "tight; source=routing-override" })
    expect(onD.system).toContain("The repository uses pnpm.")
    expect((await api(D, "/api/sync/cloud")).body).toMatchObject({ localVersion: version + 1, localChanged: false })

    // A section that is there but empty is a different thing: a schema-2 bundle without memory entries clears D's.
    for (const m of (await context(C)).memory) expect((await api(C, `/api/context/memory/${m.id}`, { method: "DELETE" })).status).toBe(200)
    expect((await action(C, { action: "push", force: true })).body).toMatchObject({
      result: "pushed",
      version: version + 2,
      counts: { memory: 0 }
    })
    expect((await action(D, { action: "sync" })).body).toMatchObject({ result: "pulled", version: version + 2 })
    expect((await context(D)).memory).toEqual([])
    expect((await context(D)).skills).toEqual(before.skills)
  })
})

describe("MCP servers in the bundle", () => {
  /** E makes the registry, F is a fresh gateway that takes it; both sync through S, space `mcp`. */
  let E: TestGateway
  let F: TestGateway
  const SPACE = "mcp"
  const TOKEN = "ghp_bundle_secret_token_0123456789abcdef"
  const HEADER = "Bearer sk-bundle-header-secret-0123456789"

  const initSpace = (gw: TestGateway) =>
    api(gw, "/api/sync/initialize", { body: { serverUrl: S.url, apiKey: ADMIN, space: SPACE, passphrase: PASSPHRASE } })
  const latestBundle = async () => {
    const stored = await api(S, `/api/cloud/bundles/${SPACE}`)
    expect(stored.status).toBe(200)
    return {
      version: stored.body.version as number,
      ciphertext: stored.body.ciphertext as string,
      content: await Effect.runPromise(openBundle(stored.body.ciphertext, PASSPHRASE))
    }
  }
  const servers = async (gw: TestGateway) => (await api(gw, "/api/mcp/servers")).body.servers
  /** A server's env and headers as stored: the sealed columns and what this gateway's storage key opens them to. */
  const sealed = (gw: TestGateway, name: string) =>
    gw.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const secrets = yield* Secrets
        const [row] = yield* sql<{ env_enc: string | null; headers_enc: string | null }>`
          SELECT env_enc, headers_enc FROM mcp_servers WHERE name = ${name}`
        const open = (s: string | null | undefined) =>
          s ? Effect.map(secrets.decrypt(s), (p) => JSON.parse(Redacted.value(p))) : Effect.succeed(null)
        return { row, env: yield* open(row?.env_enc), headers: yield* open(row?.headers_enc) }
      })
    )

  beforeAll(async () => {
    ;[E, F] = await Promise.all([startGateway(), startGateway()])
    for (const gw of [E, F]) await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  })
  afterAll(async () => {
    await Promise.all([E?.close(), F?.close()])
  })

  it("carries the registry, env and headers in the clear only inside the seal; the receiver seals them with its own key", async () => {
    const stdio = await api(E, "/api/mcp/servers", {
      body: { name: "github", transport: "stdio", command: "node", args: ["--version"], env: { GITHUB_TOKEN: TOKEN } }
    })
    expect(stdio.status, stdio.text).toBe(201)
    const http = await api(E, "/api/mcp/servers", {
      body: { name: "docs", transport: "http", url: "http://127.0.0.1:9/mcp", headers: { Authorization: HEADER }, allowedTools: ["*"] }
    })
    expect(http.status, http.text).toBe(201)

    expect((await initSpace(E)).status).toBe(200)
    const pushed = await action(E, { action: "push" })
    expect(pushed.body).toMatchObject({ result: "pushed", version: 1, counts: { mcpServers: 2 } })
    const { ciphertext, content } = await latestBundle()
    for (const plain of [TOKEN, HEADER, "GITHUB_TOKEN"]) expect(ciphertext).not.toContain(plain)
    const rows = content.sections.mcpServers!
    expect(rows.map((r) => r["name"])).toEqual(expect.arrayContaining(["github", "docs"]))
    expect(JSON.parse(String(rows.find((r) => r["name"] === "github")!["env_enc"]))).toEqual({ GITHUB_TOKEN: TOKEN })
    expect(JSON.parse(String(rows.find((r) => r["name"] === "docs")!["headers_enc"]))).toEqual({ Authorization: HEADER })

    expect(await servers(F)).toEqual([])
    expect((await initSpace(F)).status).toBe(200)
    expect((await action(F, { action: "pull" })).body).toMatchObject({ result: "pulled", version: 1, counts: { mcpServers: 2 } })
    const onF = await servers(F)
    const onE = await servers(E)
    const comparable = (list: Array<any>) => list.map(({ health: _h, ...s }) => s)
    expect(comparable(onF)).toEqual(comparable(onE))
    expect(JSON.stringify(onF)).not.toContain(TOKEN)
    const fGithub = await sealed(F, "github")
    expect(fGithub.env).toEqual({ GITHUB_TOKEN: TOKEN })
    expect(fGithub.row!.env_enc).not.toBe((await sealed(E, "github")).row!.env_enc)
    expect((await sealed(F, "docs")).headers).toEqual({ Authorization: HEADER })
    expect(fs.readFileSync(path.join(F.dataDir, "gateway.db")).includes(TOKEN)).toBe(false)
    expect((await api(F, "/api/sync/cloud")).body).toMatchObject({ localVersion: 1, localChanged: false })
  })

  it("a bundle without the section (a gateway before the registry) leaves the receiver's servers as they are", async () => {
    const before = await servers(F)
    const { version, content } = await latestBundle()
    const { mcpServers: _, ...older } = content.sections
    const put = await api(S, `/api/cloud/bundles/${SPACE}`, {
      method: "PUT",
      body: {
        baseVersion: version,
        ciphertext: sealBundle(
          {
            ...content,
            sections: { ...older, flags: [...older.flags, { namespace: "feature_flags", key: "TOOL_POLICY_MODE", value: "warn" }] }
          },
          PASSPHRASE
        )
      }
    })
    expect(put.status, put.text).toBe(201)
    const pulled = await action(F, { action: "sync" })
    expect(pulled.body).toMatchObject({ result: "pulled", version: version + 1 })
    expect(Object.keys(pulled.body.counts)).not.toContain("mcpServers")
    const comparable = (list: Array<any>) => list.map(({ health: _h, ...s }) => s)
    expect(comparable(await servers(F))).toEqual(comparable(before))
    expect((await sealed(F, "github")).env).toEqual({ GITHUB_TOKEN: TOKEN })
  })
})
