import * as fs from "node:fs"
import * as http from "node:http"
import type * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { RequestHooks } from "../src/kernel/RequestHooks.js"
import { ConfigBundle } from "../src/management/sync/ConfigBundle.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import * as Effect from "effect/Effect"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * Plugins end to end (docs/plugins.md): folders written the way the docs say, installed through
 * `/api/plugins`, attached to a real gateway in front of a fake upstream. The plugins report what
 * they see to a recorder server on 127.0.0.1 (they have the `network` permission for that).
 */

let gw: TestGateway
let up: FakeUpstream
let recorder: http.Server
let recorderUrl: string
const events: Array<{ hook: string; [k: string]: unknown }> = []
const root = tempDir("gw-plugin-src-")

const ADMIN = "gwk_plugins_admin_key_0123456789abcdef"
const USER = "gwk_plugins_user_key_0123456789abcdef"
const api = (p: string, init: { method?: string; body?: unknown } = {}) =>
  call(`${gw.url}${p}`, { ...init, headers: { authorization: `Bearer ${ADMIN}` } })

/** A plugin folder: plugin.json and index.mjs. */
const pluginDir = (name: string, manifest: Record<string, unknown>, source: string) => {
  const dir = path.join(root, name)
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "plugin.json"), JSON.stringify({ name, version: "1.0.0", main: "index.mjs", ...manifest }, null, 2))
  fs.writeFileSync(path.join(dir, "index.mjs"), source)
  return dir
}

const until = async <T>(f: () => T | undefined, ms = 5000): Promise<T> => {
  const end = Date.now() + ms
  for (;;) {
    const v = f()
    if (v !== undefined && v !== false) return v
    if (Date.now() > end) throw new Error("timed out waiting")
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** The plugin's view once `ok` holds for it. */
const viewUntil = async (name: string, ok: (v: any) => boolean, ms = 8000) => {
  const end = Date.now() + ms
  for (;;) {
    const v = (await api(`/api/plugins/${name}`)).body
    if (ok(v)) return v
    if (Date.now() > end) throw new Error(`plugin ${name} never got there: ${JSON.stringify(v)}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

const chat = (content: string, stream = false) =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model: "up/m1", stream, messages: [{ role: "user", content }] },
    headers: { authorization: `Bearer ${USER}` }
  })

beforeAll(async () => {
  recorder = http.createServer((req, res) => {
    let body = ""
    req.on("data", (c) => (body += c))
    req.on("end", () => {
      const e = JSON.parse(body)
      // Whether the plugin's folder still exists when onUninstall runs.
      if (e.hook === "onUninstall") e.folderPresent = fs.existsSync(path.join(gw.dataDir, "plugins", e.name))
      events.push(e)
      res.end("{}")
    })
  })
  await new Promise<void>((r) => recorder.listen(0, "127.0.0.1", r))
  recorderUrl = `http://127.0.0.1:${(recorder.address() as net.AddressInfo).port}`
  up = await FakeUpstream.start()
  up.always({ content: "hello from upstream" })
  gw = await startGateway({ env: { PLUGIN_MAX_RESTARTS: "2", PLUGIN_RESTART_BASE_MS: "50", PLUGIN_HOOK_TIMEOUT_MS: "300" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: USER })))
  expect(
    (
      await api("/api/providers", {
        body: { provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] }
      })
    ).status
  ).toBe(201)
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
  recorder?.close()
})

const WATCHER = (
  url: string
) => `import { definePlugin, blockRequest, modifyBody, addMetadata, addResponseHeaders, config } from "gateway/plugin-sdk"
const report = (ctx, extra = {}) => fetch(${JSON.stringify(url)}, { method: "POST", body: JSON.stringify({ hook: ctx.hook, requestId: ctx.requestId, model: ctx.model, provider: ctx.provider, ...extra }) })
const text = (ctx) => ctx.body?.messages?.[0]?.content
export default definePlugin({
  name: "watcher",
  async onRequest(ctx) {
    await report(ctx, { auth: ctx.headers.authorization ?? null, stream: ctx.stream })
    if (text(ctx) === "block me") return blockRequest({ status: 401, body: { error: { message: config.blockMessage } } })
    if (text(ctx) === "modify me") return modifyBody({ ...ctx.body, messages: [{ role: "user", content: "modified by watcher" }] })
    return [addMetadata({ seenBy: "watcher" }), addResponseHeaders({ "x-watcher": "seen" })]
  },
  async onModelSelect(ctx) { await report(ctx, { target: ctx.target?.key, seenBy: ctx.metadata.seenBy }) },
  async onStreamStart(ctx) { await report(ctx, { status: ctx.status }) },
  async onStreamEnd(ctx) { await report(ctx, { error: ctx.error }) },
  async onResponse(ctx) { await report(ctx, { status: ctx.status, streamed: ctx.streamed, tokens: ctx.usage?.completionTokens ?? null }) },
  async onError(ctx) { await report(ctx, { status: ctx.status, blockedBy: ctx.blockedBy }) },
  async onInstall(ctx) { await fetch(${JSON.stringify(url)}, { method: "POST", body: JSON.stringify({ hook: "onInstall", name: ctx.name, version: ctx.version, main: ctx.manifest.main }) }) },
  async onActivate(ctx) { await fetch(${JSON.stringify(url)}, { method: "POST", body: JSON.stringify({ hook: "onActivate", name: ctx.name }) }) },
  async onDeactivate(ctx) { await fetch(${JSON.stringify(url)}, { method: "POST", body: JSON.stringify({ hook: "onDeactivate", name: ctx.name }) }) },
  async onUninstall(ctx) { await fetch(${JSON.stringify(url)}, { method: "POST", body: JSON.stringify({ hook: "onUninstall", name: ctx.name }) }) }
})
`

describe("a plugin on the request path", () => {
  it("installs from a folder, runs its lifecycle hooks, sees a stream's events in order, modifies one body and blocks another", async () => {
    const dir = pluginDir(
      "watcher",
      {
        requires: { permissions: ["network"] },
        enabledByDefault: true,
        configSchema: {
          blockMessage: { type: "string", default: "blocked by watcher" },
          level: { type: "number", min: 1, max: 5, default: 2 }
        }
      },
      WATCHER(recorderUrl)
    )
    const installed = await api("/api/plugins", { body: { path: dir } })
    expect(installed.status).toBe(201)
    expect(installed.body).toMatchObject({
      name: "watcher",
      version: "1.0.0",
      enabled: true,
      state: "running",
      permissions: ["network"],
      config: { blockMessage: "blocked by watcher", level: 2 }
    })
    await until(() => events.some((e) => e.hook === "onActivate"))
    expect(events.map((e) => e.hook)).toEqual(["onInstall", "onActivate"])
    expect(events[0]).toMatchObject({ name: "watcher", version: "1.0.0", main: "index.mjs" })
    events.length = 0

    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${USER}` },
      body: JSON.stringify({ model: "up/m1", stream: true, messages: [{ role: "user", content: "hi" }] })
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-watcher")).toBe("seen")
    expect(await res.text()).toContain("hello")
    const requestId = res.headers.get("x-gateway-request-id")
    await until(() => events.some((e) => e.hook === "onResponse"))
    const mine = events.filter((e) => e.requestId === requestId)
    expect(mine.map((e) => e.hook)).toEqual(["onRequest", "onModelSelect", "onStreamStart", "onStreamEnd", "onResponse"])
    expect(mine[0]).toMatchObject({ model: "up/m1", stream: true })
    // Credentials reach plugins masked.
    expect(mine[0]!.auth).toMatch(/^Bearer /)
    expect(mine[0]!.auth).not.toContain(USER)
    expect(mine[1]).toMatchObject({ model: "m1", provider: "openai-compatible", target: "up/m1", seenBy: "watcher" })
    expect(mine[4]).toMatchObject({ status: 200, streamed: true })

    const modified = await chat("modify me")
    expect(modified.status).toBe(200)
    expect(up.requests.at(-1)!.body.messages[0].content).toBe("modified by watcher")

    const blocked = await chat("block me")
    expect(blocked.status).toBe(401)
    expect(blocked.body).toEqual({ error: { message: "blocked by watcher" } })
    await until(() => events.some((e) => e.hook === "onError"))
    expect(events.find((e) => e.hook === "onError")).toMatchObject({ status: 401, blockedBy: "watcher" })

    const status = (await api("/api/plugins/watcher")).body
    const onRequest = status.hooks.find((h: any) => h.hook === "onRequest")
    expect(onRequest.calls).toBeGreaterThanOrEqual(3)
    expect(onRequest.failures).toBe(0)
    expect(onRequest.averageMs).toBeGreaterThan(0)
  })

  it("takes configuration checked against its configSchema and applies it live", async () => {
    const bad = await api("/api/plugins/watcher/config", { method: "PATCH", body: { values: { level: 9 } } })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toMatch(/level: must be at most 5/)
    const unknown = await api("/api/plugins/watcher/config", { method: "PATCH", body: { values: { colour: "red" } } })
    expect(unknown.status).toBe(400)
    expect(unknown.body.message).toMatch(/colour: is not a setting/)
    const ok = await api("/api/plugins/watcher/config", { method: "PATCH", body: { values: { blockMessage: "not today" } } })
    expect(ok.status).toBe(200)
    expect(ok.body.config).toEqual({ blockMessage: "not today", level: 2 })
    expect(ok.body.state).toBe("running")
    expect((await chat("block me")).body).toEqual({ error: { message: "not today" } })
    // Persisted in the store's plugins namespace (so in backups and sync bundles).
    const bundle = await gw.run(Effect.flatMap(ConfigBundle, (b) => b.current("stored")))
    const entry = bundle.sections.settings.find((s) => s.namespace === "plugins" && s.key === "watcher")
    expect(JSON.parse(String(entry?.value)).config).toEqual({ blockMessage: "not today", level: 2 })
  })

  it("disable detaches it (onDeactivate); enable attaches it again (onActivate)", async () => {
    events.length = 0
    const off = await api("/api/plugins/watcher/disable", { method: "POST" })
    expect(off.body).toMatchObject({ enabled: false, state: "stopped", pid: null })
    expect((await chat("block me")).status).toBe(200)
    const on = await api("/api/plugins/watcher/enable", { method: "POST" })
    expect(on.body).toMatchObject({ enabled: true, state: "running" })
    expect((await chat("block me")).status).toBe(401)
    await until(() => events.some((e) => e.hook === "onActivate"))
    expect(events.filter((e) => e.hook.startsWith("onDe") || e.hook === "onActivate").map((e) => e.hook)).toEqual([
      "onDeactivate",
      "onActivate"
    ])
  })

  it("remove runs onUninstall while its files still exist, then deletes them; with no plugin left nothing is on the request path", async () => {
    events.length = 0
    const removed = await api("/api/plugins/watcher", { method: "DELETE" })
    expect(removed.status).toBe(200)
    expect(removed.body).toEqual({ removed: "watcher" })
    const uninstall = events.find((e) => e.hook === "onUninstall")
    expect(uninstall).toMatchObject({ name: "watcher", folderPresent: true })
    expect(fs.existsSync(path.join(gw.dataDir, "plugins", "watcher"))).toBe(false)
    expect((await api("/api/plugins/watcher")).status).toBe(404)
    const registered = await gw.run(Effect.map(RequestHooks, (h) => h.registered().map((r) => r.name)))
    expect(registered).not.toContain("plugins")
    expect(registered).not.toContain("watcher")
  })
})

describe("several plugins and the other request-path events", () => {
  it("run in ascending priority: a body change and metadata reach the next plugin", async () => {
    const first = pluginDir(
      "first",
      { hooks: { onRequest: { priority: 10 } } },
      `import { definePlugin, modifyBody, addMetadata } from "gateway/plugin-sdk"
export default definePlugin({ name: "first", priority: 500, onRequest(ctx) { return [modifyBody({ ...ctx.body, messages: [{ role: "user", content: "changed by first" }] }), addMetadata({ step: 1 })] } })`
    )
    const second = pluginDir(
      "second",
      { requires: { permissions: ["network"] } },
      `import { definePlugin } from "gateway/plugin-sdk"
export default definePlugin({ name: "second", priority: 20, async onRequest(ctx) {
  await fetch(${JSON.stringify(recorderUrl)}, { method: "POST", body: JSON.stringify({ hook: "second", content: ctx.body.messages[0].content, step: ctx.metadata.step }) })
} })`
    )
    // Installed in the other order: the priorities (the manifest's over the definition's) decide.
    expect((await api("/api/plugins", { body: { path: second, enable: true } })).status).toBe(201)
    expect((await api("/api/plugins", { body: { path: first, enable: true } })).status).toBe(201)
    events.length = 0
    expect((await chat("original")).status).toBe(200)
    await until(() => events.some((e) => e.hook === "second"))
    expect(events.find((e) => e.hook === "second")).toEqual({ hook: "second", content: "changed by first", step: 1 })
    expect(up.requests.at(-1)!.body.messages[0].content).toBe("changed by first")
    expect((await api("/api/plugins/first")).body.hooks.find((h: any) => h.hook === "onRequest").priority).toBe(10)
    expect((await api("/api/plugins/first", { method: "DELETE" })).status).toBe(200)
    expect((await api("/api/plugins/second", { method: "DELETE" })).status).toBe(200)
  })

  it("see onComboResolve, onProviderError, onRateLimit on a fallback, and onQuotaExhaust when a key's budget is spent", async () => {
    const dir = pluginDir(
      "observer",
      { requires: { permissions: ["network"] } },
      `import { definePlugin } from "gateway/plugin-sdk"
const report = (ctx, extra) => fetch(${JSON.stringify(recorderUrl)}, { method: "POST", body: JSON.stringify({ hook: ctx.hook, requestId: ctx.requestId, ...extra }) })
export default definePlugin({
  name: "observer",
  onComboResolve: (ctx) => report(ctx, { scope: ctx.scope, candidates: ctx.candidates.map((c) => c.key) }),
  onProviderError: (ctx) => report(ctx, { status: ctx.status, target: ctx.target.key, retryable: ctx.retryable }),
  onRateLimit: (ctx) => report(ctx, { status: ctx.status }),
  onQuotaExhaust: (ctx) => report(ctx, { kind: ctx.kind, window: ctx.window, action: ctx.action, over: ctx.spentUsd >= ctx.limitUsd }),
  onResponse: (ctx) => report(ctx, { status: ctx.status, model: ctx.usage?.model ?? null }),
  onError: (ctx) => report(ctx, { status: ctx.status, code: ctx.error?.code ?? null })
})`
    )
    expect((await api("/api/plugins", { body: { path: dir, enable: true } })).status).toBe(201)
    expect(
      (
        await api("/api/providers", {
          body: { provider: "openai", name: "oai", apiKey: "sk-oai-test", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" }
        })
      ).status
    ).toBe(201)
    expect(
      (await api("/api/combos", { body: { name: "pair", strategy: "priority", targets: [{ model: "oai/gpt-4o" }, { model: "up/m1" }] } }))
        .status
    ).toBe(201)
    events.length = 0
    up.next({ status: 429 })
    const fell = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "pair", messages: [{ role: "user", content: "hi" }] },
      headers: { authorization: `Bearer ${USER}` }
    })
    expect(fell.status).toBe(200)
    await until(() => events.some((e) => e.hook === "onResponse"))
    expect(events.map((e) => e.hook)).toEqual(["onComboResolve", "onProviderError", "onRateLimit", "onResponse"])
    expect(events[0]).toMatchObject({ scope: "pair", candidates: ["oai/gpt-4o", "up/m1"] })
    expect(events[1]).toMatchObject({ status: 429, target: "oai/gpt-4o", retryable: true })

    // A key with a tiny daily budget: its first request spends it, the next is refused (no free fallback model is connected).
    await gw.resetResilience()
    const spender = (await api("/api/keys", { body: { name: "spender" } })).body
    const secret: string = spender.secret ?? spender.key
    expect((await api("/api/usage/budget", { body: { apiKeyId: spender.id, dailyLimitUsd: 0.000001 } })).status).toBeLessThan(300)
    const ask = () =>
      call(`${gw.url}/v1/chat/completions`, {
        body: { model: "oai/gpt-4o", messages: [{ role: "user", content: "hi" }] },
        headers: { authorization: `Bearer ${secret}` }
      })
    events.length = 0
    expect((await ask()).status).toBe(200)
    await gw.usageWritten()
    // Events reach plugins without delaying the answer: the first request's own onResponse may still be on its way.
    await until(() => events.some((e) => e.hook === "onResponse"))
    events.length = 0
    const refused = await ask()
    expect(refused.status).toBe(429)
    await until(() => events.some((e) => e.hook === "onError"))
    expect(events.map((e) => e.hook)).toEqual(["onQuotaExhaust", "onError"])
    expect(events[0]).toMatchObject({ kind: "budget", window: "daily", action: "refused", over: true })
    expect(events[1]).toMatchObject({ status: 429, code: "budget_exhausted" })
    expect((await api("/api/plugins/observer", { method: "DELETE" })).status).toBe(200)
  })
})

describe("a plugin that misbehaves", () => {
  it("one that loops forever is stopped at its time limit and the request goes on", async () => {
    const dir = pluginDir(
      "looper",
      {},
      `import { definePlugin } from "gateway/plugin-sdk"
export default definePlugin({ name: "looper", onRequest() { for (;;) {} } })`
    )
    expect((await api("/api/plugins", { body: { path: dir, enable: true } })).status).toBe(201)
    const res = await chat("hi")
    expect(res.status).toBe(200)
    let status = (await api("/api/plugins/looper")).body
    let onRequest = status.hooks.find((h: any) => h.hook === "onRequest")
    expect(onRequest.failures).toBe(1)
    // Six at once: each waits at most its limit (the ones queued behind are never sent), each counted once.
    const started = Date.now()
    const burst = await Promise.all(Array.from({ length: 6 }, () => chat("hi")))
    expect(burst.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200])
    expect(Date.now() - started).toBeLessThan(3000)
    status = (await api("/api/plugins/looper")).body
    onRequest = status.hooks.find((h: any) => h.hook === "onRequest")
    expect(onRequest.calls).toBe(7)
    expect(onRequest.failures).toBe(7)
    expect(onRequest.lastError).toMatch(/time limit|did not answer/)
    expect(status.state).toBe("running")
    expect((await api("/api/plugins/looper", { method: "DELETE" })).status).toBe(200)
  })

  it("one whose process exits is started again with a backoff; repeated crashes disable it with the reason", async () => {
    const dir = pluginDir(
      "fragile",
      {},
      `import { definePlugin } from "gateway/plugin-sdk"
export default definePlugin({ name: "fragile", onRequest() {} })`
    )
    const installed = await api("/api/plugins", { body: { path: dir, enable: true } })
    expect(installed.body.state).toBe("running")
    const firstPid: number = installed.body.pid
    process.kill(firstPid, "SIGKILL")
    let view: any = await viewUntil("fragile", (v) => v.state === "running" && v.pid !== firstPid)
    expect(view.restarts).toBe(1)
    expect(view.reason).toMatch(/process ended/)
    expect((await chat("hi")).status).toBe(200)
    // Killed again at once, and again: past PLUGIN_MAX_RESTARTS it is disabled, saying why.
    for (let i = 0; i < 3; i++) {
      const pid = view.pid
      if (typeof pid === "number") process.kill(pid, "SIGKILL")
      view = await viewUntil("fragile", (v) => v.state === "disabled" || (v.state === "running" && v.pid !== pid))
      if (view.state === "disabled") break
    }
    expect(view).toMatchObject({ state: "disabled", enabled: false })
    expect(view.reason).toMatch(/disabled after 2 crashes in a row/)
    expect((await chat("hi")).status).toBe(200)
    expect((await api("/api/plugins/fragile", { method: "DELETE" })).status).toBe(200)
  })

  it("a fail-closed plugin that cannot answer refuses the request with 503 plugin_unavailable naming it", async () => {
    const dir = pluginDir(
      "guard",
      { failClosed: true },
      `import { definePlugin } from "gateway/plugin-sdk"
export default definePlugin({ name: "guard", onRequest(ctx) { if (ctx.body.messages[0].content === "hang") for (;;) {} } })`
    )
    expect((await api("/api/plugins", { body: { path: dir, enable: true } })).status).toBe(201)
    expect((await chat("fine")).status).toBe(200)
    const refused = await chat("hang")
    expect(refused.status).toBe(503)
    expect(refused.body.error.code).toBe("plugin_unavailable")
    expect(refused.body.error.message).toMatch(/plugin guard/)
    expect((await api("/api/plugins/guard", { method: "DELETE" })).status).toBe(200)
  })
})

describe("install from a .tgz", () => {
  it("takes an uploaded archive (npm pack's package/ folder taken off) and a .tgz path; refuses bytes that are not one and entries outside the folder", async () => {
    const { execFileSync } = await import("node:child_process")
    const src = path.join(root, "pack-src", "package")
    fs.mkdirSync(src, { recursive: true })
    fs.writeFileSync(path.join(src, "plugin.json"), JSON.stringify({ name: "packed", version: "2.0.0", main: "lib/index.mjs" }))
    fs.mkdirSync(path.join(src, "lib"))
    fs.writeFileSync(
      path.join(src, "lib", "index.mjs"),
      `import { definePlugin } from "gateway/plugin-sdk"\nexport default definePlugin({ name: "packed", onRequest() {} })`
    )
    const tgz = path.join(root, "packed-2.0.0.tgz")
    execFileSync("tar", ["czf", tgz, "-C", path.join(root, "pack-src"), "package"])
    const uploaded = await fetch(`${gw.url}/api/plugins/upload?enable=true`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/gzip" },
      body: fs.readFileSync(tgz)
    })
    expect(uploaded.status).toBe(201)
    expect(await uploaded.json()).toMatchObject({ name: "packed", version: "2.0.0", enabled: true, state: "running" })
    expect(fs.existsSync(path.join(gw.dataDir, "plugins", "packed", "lib", "index.mjs"))).toBe(true)
    expect((await api("/api/plugins/packed", { method: "DELETE" })).status).toBe(200)
    const byPath = await api("/api/plugins", { body: { path: tgz } })
    expect(byPath.status).toBe(201)
    expect(byPath.body).toMatchObject({ name: "packed", enabled: false, state: "stopped" })
    expect((await api("/api/plugins/packed", { method: "DELETE" })).status).toBe(200)

    const junk = await fetch(`${gw.url}/api/plugins/upload`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
      body: "not an archive"
    })
    expect(junk.status).toBe(400)
    expect(((await junk.json()) as any).message).toMatch(/not a \.tgz/)
    const evil = path.join(root, "evil-src")
    fs.mkdirSync(path.join(evil, "a"), { recursive: true })
    fs.writeFileSync(path.join(evil, "escape.txt"), "x")
    const evilTgz = path.join(root, "evil.tgz")
    execFileSync("tar", ["czf", evilTgz, "-C", path.join(evil, "a"), "--transform", "s,^,../../,", "-P", "../escape.txt"])
    const refused = await fetch(`${gw.url}/api/plugins/upload`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
      body: fs.readFileSync(evilTgz)
    })
    expect(refused.status).toBe(400)
    expect(((await refused.json()) as any).message).toMatch(/outside its folder/)
  })
})

describe("install refusals", () => {
  it("answers 400 naming the problem for a bad manifest, a plugin that does not load and a missing path; 409 for a name installed twice", async () => {
    const bad = pluginDir("bad-manifest", { name: "Bad Name" }, "export default 1")
    const r1 = await api("/api/plugins", { body: { path: bad } })
    expect(r1.status).toBe(400)
    expect(r1.body.message).toMatch(/name: must be kebab-case/)
    const broken = pluginDir("broken", {}, `import { definePlugin } from "gateway/plugin-sdk"\nthrow new Error("boom at load")`)
    const r2 = await api("/api/plugins", { body: { path: broken } })
    expect(r2.status).toBe(400)
    expect(r2.body.message).toMatch(/did not load: .*boom at load/)
    expect(fs.existsSync(path.join(gw.dataDir, "plugins", "broken"))).toBe(false)
    expect(fs.existsSync(path.join(gw.dataDir, "plugin-data", "broken"))).toBe(false)
    const badImport = pluginDir("bad-import", {}, `import fs from "node:fs"\nexport default fs`)
    const r5 = await api("/api/plugins", { body: { path: badImport } })
    expect(r5.status).toBe(400)
    expect(r5.body.message).toMatch(/cannot import "node:fs"/)
    const noMain = pluginDir("no-main", { name: "Bad Name", main: "nope.mjs" }, "")
    const r6 = await api("/api/plugins", { body: { path: noMain } })
    expect(r6.body.message).toMatch(/name: must be kebab-case.*main: nope\.mjs does not exist/)
    const r3 = await api("/api/plugins", { body: { path: path.join(root, "nowhere") } })
    expect(r3.status).toBe(400)
    const ok = pluginDir("twice", {}, `import { definePlugin } from "gateway/plugin-sdk"\nexport default definePlugin({ name: "twice" })`)
    expect((await api("/api/plugins", { body: { path: ok } })).status).toBe(201)
    const r4 = await api("/api/plugins", { body: { path: ok } })
    expect(r4.status).toBe(409)
    expect((await api("/api/plugins/twice")).body.state).toBe("stopped")
    expect((await api("/api/plugins/twice", { method: "DELETE" })).status).toBe(200)
  })
})

describe("the rate limit", () => {
  it("skips calls past PLUGIN_RATE_LIMIT a second (counted as skipped); the requests go on", async () => {
    const limited = await startGateway({ env: { PLUGIN_RATE_LIMIT: "2" } })
    try {
      await limited.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const admin = (p: string, body?: unknown) =>
        call(`${limited.url}${p}`, { ...(body === undefined ? {} : { body }), headers: { authorization: `Bearer ${ADMIN}` } })
      expect(
        (await admin("/api/providers", { provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] }))
          .status
      ).toBe(201)
      const dir = pluginDir(
        "counted",
        {},
        `import { definePlugin } from "gateway/plugin-sdk"\nexport default definePlugin({ name: "counted", onRequest() {} })`
      )
      expect((await admin("/api/plugins", { path: dir, enable: true })).status).toBe(201)
      const burstFrom = Date.now()
      const answers = await Promise.all(
        Array.from({ length: 6 }, () =>
          call(`${limited.url}/v1/chat/completions`, {
            body: { model: "up/m1", messages: [{ role: "user", content: "hi" }] },
            headers: { authorization: `Bearer ${ADMIN}` }
          })
        )
      )
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200])
      const onRequest = (await admin("/api/plugins/counted")).body.hooks.find((h: any) => h.hook === "onRequest")
      // The bucket refills continuously (2 a second): a machine slow enough to spread the six over
      // more than half a second lets one more through for each half second they took.
      const refilled = Math.floor((Date.now() - burstFrom) / 500)
      expect(onRequest.calls + onRequest.skipped).toBe(6)
      expect(onRequest.calls).toBeGreaterThanOrEqual(2)
      expect(onRequest.calls).toBeLessThanOrEqual(2 + refilled)
      expect(onRequest.skipped).toBeGreaterThanOrEqual(1)
      expect(limited.logs.some((l) => /counted: onRequest skipped: over its rate limit \(2 calls a second\)/.test(l.message))).toBe(true)
    } finally {
      await limited.close()
    }
  })
})
