import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PluginPermission } from "../src/services/plugins/sandbox/protocol.js"
import { permissionArgs, type PluginProcess, PluginProcessError, spawnPluginProcess } from "../src/services/plugins/sandbox/process.js"

/**
 * The plugin sandbox (src/services/plugins/sandbox/): a plugin in its own process under Node's
 * permission model, evaluated in a QuickJS context whose globals come from its manifest's
 * permissions only. Each permission is checked absent and present, with the escapes a plugin
 * author would try; a plugin that loops, never settles, allocates without end or loses its process
 * fails its call and nothing else. Needs the compiled sandbox (npm run build).
 */

const root = fs.mkdtempSync(path.join(os.tmpdir(), "gw-plugins-"))
const secretFile = path.join(root, "outside-secret.txt")
const processes: Array<PluginProcess> = []
let server: http.Server
let serverUrl: string

/** A plugin folder with `main.mjs` = `source` (and other files), spawned with `permissions`. */
const plugin = async (source: string, permissions: ReadonlyArray<PluginPermission> = [], files: Record<string, string> = {}) => {
  const dir = fs.mkdtempSync(path.join(root, "p-"))
  fs.writeFileSync(path.join(dir, "main.mjs"), source)
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text)
  const p = await spawnPluginProcess({
    dir,
    main: "main.mjs",
    permissions,
    dataDir: path.join(dir, ".data"),
    config: { greeting: "hello" }
  })
  processes.push(p)
  return p
}

/** A plugin whose onRequest runs `body` (an async function body) and returns its value. */
const probe = (body: string, permissions: ReadonlyArray<PluginPermission> = []) =>
  plugin(
    `import { definePlugin } from "gateway/plugin-sdk"\nexport default definePlugin({ name: "probe", onRequest: async (ctx) => { ${body} } })`,
    permissions
  )

const ask = (p: PluginProcess, ctx: unknown = {}, timeoutMs = 2_000) => p.call("onRequest", ctx, timeoutMs)

beforeAll(async () => {
  fs.writeFileSync(secretFile, "the secret")
  server = http.createServer((req, res) => res.end(JSON.stringify({ path: req.url, method: req.method })))
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  serverUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`
})

afterAll(async () => {
  await Promise.all(processes.map((p) => p.kill()))
  await new Promise((resolve) => server.close(resolve))
  fs.rmSync(root, { recursive: true, force: true })
})

const GLOBALS = [
  "fetch",
  "AbortController",
  "Headers",
  "Request",
  "Response",
  "process",
  "require",
  "fs",
  "exec",
  "execSync",
  "setTimeout",
  "__hostFetch",
  "module",
  "Buffer"
]
const typesOf = `return Object.fromEntries(${JSON.stringify(GLOBALS)}.map((g) => [g, typeof globalThis[g]]))`

describe("the SDK inside the sandbox", () => {
  it("definePlugin fills the defaults and the helpers return what the gateway reads; the plugin's config and its own modules are there", async () => {
    const p = await plugin(
      `import { definePlugin, blockRequest, modifyBody, addMetadata, config } from "gateway/plugin-sdk"
       import { shout } from "./lib.mjs"
       export default definePlugin({
         name: "sdk-check",
         onRequest: (ctx) => ctx.model === "blocked" ? blockRequest({ status: 429, body: { error: { message: shout(config.greeting) } } }) : modifyBody({ ...ctx.body, extra: true }),
         onResponse: () => addMetadata({ seen: true }),
         onError: () => blockRequest()
       })`,
      [],
      { "lib.mjs": "export const shout = (s) => s.toUpperCase()" }
    )
    expect(p.info).toEqual({ name: "sdk-check", priority: 100, enabled: true, hooks: ["onRequest", "onResponse", "onError"] })
    expect(await ask(p, { model: "m", body: { a: 1 } })).toEqual({ __gateway: "modify", body: { a: 1, extra: true } })
    expect(await ask(p, { model: "blocked" })).toEqual({
      __gateway: "block",
      response: { status: 429, body: { error: { message: "HELLO" } } }
    })
    expect(await p.call("onResponse", {}, 1000)).toEqual({ __gateway: "metadata", metadata: { seen: true } })
    expect(await p.call("onError", {}, 1000)).toEqual({ __gateway: "block", response: null })
    // A hook the plugin does not define answers nothing.
    expect(await p.call("onStreamEnd", {}, 1000)).toBeNull()
  })

  it("refuses a definition that is not one: a name that is not kebab-case, a syntax error, no default export", async () => {
    await expect(
      plugin(`import { definePlugin } from "gateway/plugin-sdk"\nexport default definePlugin({ name: "Not Kebab" })`)
    ).rejects.toThrow(/kebab-case/)
    await expect(plugin(`export default {{`)).rejects.toThrow(PluginProcessError)
    await expect(plugin(`export const x = 1`)).rejects.toThrow(/default-export/)
  })
})

describe("no permission: nothing of Node exists", () => {
  it("no fetch, AbortController, Headers, Request, Response, process, require, fs, exec, Buffer", async () => {
    const p = await probe(typesOf)
    expect(await ask(p)).toEqual(Object.fromEntries(GLOBALS.map((g) => [g, "undefined"])))
  })

  it("the escapes find nothing: Function constructors, dynamic import of node: modules or files outside, require through a prototype chain", async () => {
    const p = await probe(`
      const out = {}
      out.ctor = ({}).constructor.constructor("return typeof process")()
      out.asyncCtor = await Object.getPrototypeOf(async function () {}).constructor("return typeof require")()
      out.globalKeys = Function("return Object.getOwnPropertyNames(globalThis).filter((k) => /^(process|require|fetch|Buffer|fs|exec|module)$/.test(k))")()
      for (const spec of ["node:fs", "fs", "child_process", "../outside.mjs", ${JSON.stringify(secretFile)}]) {
        try { await import(spec); out[spec] = "imported" } catch (e) { out[spec] = "refused" }
      }
      try { out.proto = [].constructor.constructor("return require('fs')")() } catch (e) { out.proto = e.name }
      return out`)
    const out = (await ask(p)) as Record<string, unknown>
    expect(out).toMatchObject({ ctor: "undefined", asyncCtor: "undefined", globalKeys: [], proto: "ReferenceError" })
    for (const spec of ["node:fs", "fs", "child_process", "../outside.mjs", secretFile]) expect(out[spec], spec).toBe("refused")
  })
})

describe("loading", () => {
  it("a refused import says which and why; the configuration's carrier global is gone once loaded", async () => {
    await expect(plugin(`import fs from "node:fs"\nexport default fs`)).rejects.toThrow(
      /cannot import "node:fs": a plugin imports only gateway\/plugin-sdk and its own files/
    )
    await expect(plugin(`import x from "../outside.mjs"\nexport default x`)).rejects.toThrow(
      /cannot import "..\/outside.mjs": it is outside the plugin's folder/
    )
    const p = await probe(`return typeof globalThis.__pluginConfig`)
    expect(await ask(p)).toBe("undefined")
  })
})

describe("each permission grants its capability and nothing else", () => {
  it("network: fetch (with Headers, Request, Response, AbortController) reaches a server; nothing else appears", async () => {
    const p = await probe(
      `const r = await fetch(new Request(${JSON.stringify(serverUrl)} + "/x?y=1", { method: "POST", headers: new Headers({ "x-a": "1" }), body: "hi" }))
       const types = (() => { ${typesOf} })()
       return { status: r.status, ok: r.ok, json: await r.json(), type: r.headers.get("content-type"), types, aborted: new AbortController().signal.aborted }`,
      ["network"]
    )
    const out = (await ask(p)) as any
    expect(out).toMatchObject({ status: 200, ok: true, json: { path: "/x?y=1", method: "POST" }, aborted: false })
    expect(out.types).toMatchObject({
      fetch: "function",
      Headers: "function",
      Request: "function",
      Response: "function",
      AbortController: "function",
      process: "undefined",
      fs: "undefined",
      exec: "undefined"
    })
  })

  it("file-read: reads outside its folder only with it", async () => {
    const read = `return await fs.readFile(${JSON.stringify(secretFile)})`
    expect(await ask(await probe(read, ["file-read"]))).toBe("the secret")
    await expect(ask(await probe(read))).rejects.toThrow(/'?fs'? is not defined/)
    const listing = (await ask(
      await probe(`return { list: await fs.readdir(${JSON.stringify(root)}), stat: await fs.stat(${JSON.stringify(secretFile)}) }`, [
        "file-read"
      ])
    )) as any
    expect(listing.list).toContain("outside-secret.txt")
    expect(listing.stat).toMatchObject({ size: 10, isFile: true })
  })

  it("file-write: writes in its data folder only, and only with it", async () => {
    const p = await probe(
      `await fs.mkdir("notes"); await fs.writeFile("notes/a.txt", "written")
       let outside = "written"
       try { await fs.writeFile(${JSON.stringify(path.join(root, "escape.txt"))}, "x") } catch (e) { outside = e.message }
       return { dataDir: fs.dataDir, outside, read: typeof fs.readFile }`,
      ["file-write"]
    )
    const out = (await ask(p)) as any
    expect(fs.readFileSync(path.join(out.dataDir, "notes", "a.txt"), "utf8")).toBe("written")
    expect(out.outside).toContain("writes go to the plugin's data folder")
    expect(out.read).toBe("undefined")
    expect(fs.existsSync(path.join(root, "escape.txt"))).toBe(false)
    await expect(ask(await probe(`return await fs.writeFile("a", "b")`))).rejects.toThrow(/'?fs'? is not defined/)
  })

  it("env: a read-only process.env, only with it", async () => {
    process.env["GW_PLUGIN_TEST_VAR"] = "visible"
    try {
      const p = await probe(
        `"use strict"; let changed = "no"; try { process.env.GW_PLUGIN_TEST_VAR = "changed" } catch (e) { changed = e.name } return { v: process.env.GW_PLUGIN_TEST_VAR, changed }`,
        ["env"]
      )
      expect(await ask(p)).toEqual({ v: "visible", changed: "TypeError" })
      await expect(ask(await probe(`return process.env.GW_PLUGIN_TEST_VAR`))).rejects.toThrow(/'?process'? is not defined/)
    } finally {
      delete process.env["GW_PLUGIN_TEST_VAR"]
    }
  })

  it("exec: exec and execSync run a process, only with it", async () => {
    const p = await probe(`const r = await exec("echo", ["from", "exec"]); return { r, sync: execSync("echo", ["sync"]).trim() }`, ["exec"])
    expect(await ask(p)).toEqual({ r: { code: 0, stdout: "from exec\n", stderr: "" }, sync: "sync" })
    await expect(ask(await probe(`return await exec("echo", ["x"])`))).rejects.toThrow(/'?exec'? is not defined/)
  })
})

describe("a plugin that misbehaves fails its own call, never the caller", () => {
  it("a loop forever is interrupted at the time limit; the plugin answers the next call", async () => {
    const p = await plugin(`import { definePlugin } from "gateway/plugin-sdk"
      export default definePlugin({ name: "loops", onRequest: (ctx) => { if (ctx.loop) for (;;) {} return "fine" } })`)
    const started = Date.now()
    await expect(ask(p, { loop: true }, 300)).rejects.toThrow(/interrupted/)
    expect(Date.now() - started).toBeLessThan(1_300)
    expect(await ask(p, { loop: false })).toBe("fine")
  })

  it("a promise that never settles fails at once, and the plugin answers the next call", async () => {
    const p = await plugin(`import { definePlugin } from "gateway/plugin-sdk"
      export default definePlugin({ name: "hangs", onRequest: (ctx) => ctx.hang ? new Promise(() => {}) : "ok" })`)
    await expect(ask(p, { hang: true })).rejects.toThrow(/never settles/)
    expect(await ask(p, {})).toBe("ok")
  })

  it("endless allocation goes over the memory limit: the call fails saying so and the process is stopped", async () => {
    const p = await plugin(`import { definePlugin } from "gateway/plugin-sdk"
      export default definePlugin({ name: "greedy", onRequest: () => { const a = []; for (;;) a.push(new Uint8Array(1 << 20)) } })`)
    await expect(ask(p, {}, 20_000)).rejects.toThrow(/over its memory limit \(256 MB\)/)
    expect(await p.exited).toBe("SIGKILL")
    await expect(ask(p)).rejects.toThrow(/memory limit/)
  }, 30_000)

  it("a process that dies rejects what waits on it, and every call after", async () => {
    const p = await plugin(
      `import { definePlugin } from "gateway/plugin-sdk"
      export default definePlugin({ name: "dies", onRequest: async (ctx) => ctx.wait ? await new Promise(() => {}) : "ok" })`,
      ["network"]
    )
    expect(await ask(p)).toBe("ok")
    process.kill(p.pid, "SIGKILL")
    await p.exited
    await expect(ask(p)).rejects.toThrow(/exited/)
  })
})

describe("the process's own wall (Node's permission model), should the sandbox ever leak", () => {
  /** What a node started with the plugin's flags gets when it tries `code` itself. */
  const underFlags = (permissions: ReadonlyArray<PluginPermission>, code: string) => {
    const dir = fs.mkdtempSync(path.join(root, "wall-"))
    const script = path.join(dir, "try.js")
    fs.writeFileSync(script, code)
    const args = permissionArgs({ dir, permissions, dataDir: path.join(dir, ".data") }, script)
    const r = spawnSync(process.execPath, [...args, "--no-warnings", script], { encoding: "utf8", timeout: 10_000 })
    return r.stdout.trim()
  }
  const attempt = (what: string) => `try { ${what}; console.log("allowed") } catch (e) { console.log(e.code ?? e.message) }`

  it("without file-read it may not read outside its folder; with it, it may", () => {
    const read = attempt(`require("node:fs").readFileSync(${JSON.stringify(secretFile)})`)
    expect(underFlags([], read)).toBe("ERR_ACCESS_DENIED")
    expect(underFlags(["file-read"], read)).toBe("allowed")
  })

  it("without file-write it may write nothing; without exec it may start no process; never an addon or a worker", () => {
    expect(underFlags([], attempt(`require("node:fs").writeFileSync(${JSON.stringify(path.join(root, "w.txt"))}, "x")`))).toBe(
      "ERR_ACCESS_DENIED"
    )
    expect(underFlags([], attempt(`require("node:child_process").execFileSync("true")`))).toBe("ERR_ACCESS_DENIED")
    expect(underFlags(["exec"], attempt(`require("node:child_process").execFileSync("true")`))).toBe("allowed")
    expect(
      underFlags(
        ["exec", "file-read", "file-write", "network", "env"],
        attempt(`new (require("node:worker_threads").Worker)("1", { eval: true })`)
      )
    ).toBe("ERR_ACCESS_DENIED")
  })
})
