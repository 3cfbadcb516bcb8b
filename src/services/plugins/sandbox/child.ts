/**
 * One plugin's process: evaluates the plugin in its own QuickJS context whose globals come from the granted permissions
 * only, and answers hook calls over IPC; Node's permission model is the second wall (docs/plugins.md#the-sandbox).
 */
import { execFile, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { QuickJSHandle } from "quickjs-emscripten"
import { type ChildMessage, type LoadRequest, type ParentMessage, PLUGIN_HOOKS, type PluginPermission, SDK_MODULE } from "./protocol.js"
import { SandboxVm } from "./vm.js"

const send = (m: ChildMessage) => process.send?.(m)

let sandbox: SandboxVm | undefined
let plugin: QuickJSHandle | undefined
/** `(v) => Promise.resolve(v)` in the VM. */
let toPromise: QuickJSHandle | undefined

const defineGlobals = (vm: SandboxVm, load: LoadRequest) => {
  const granted = new Set<PluginPermission>(load.permissions)
  const ctx = vm.ctx
  const g = ctx.global
  vm.defineConsole((level, text) => send({ t: "log", level, text }))

  if (granted.has("network"))
    vm.defineFetch(async (url, method, headers, body) => {
      const res = await fetch(url, { method, headers, ...(body !== undefined ? { body } : {}) })
      return {
        status: res.status,
        statusText: res.statusText,
        headers: Object.fromEntries(res.headers),
        body: await res.text(),
        url: res.url
      }
    })
  const needsFs = granted.has("file-read") || granted.has("file-write")
  if (needsFs) {
    const fsObj = ctx.newObject()
    if (granted.has("file-read")) {
      vm.fn(fsObj, "readFile", (p, encoding) =>
        vm.bridge(() => fs.promises.readFile(String(p), (encoding as BufferEncoding | undefined) ?? "utf8"))
      )
      vm.fn(fsObj, "readdir", (p) => vm.bridge(() => fs.promises.readdir(String(p))))
      vm.fn(fsObj, "stat", (p) =>
        vm.bridge(async () => {
          const s = await fs.promises.stat(String(p))
          return { size: s.size, isFile: s.isFile(), isDirectory: s.isDirectory(), mtimeMs: s.mtimeMs }
        })
      )
    }
    if (granted.has("file-write")) {
      // Writes land in the plugin's data folder: a relative path is taken from there, an absolute one must be inside it.
      const inData = (p: unknown) => {
        const resolved = path.resolve(load.dataDir, String(p))
        if (resolved !== load.dataDir && !resolved.startsWith(`${load.dataDir}${path.sep}`))
          throw new Error(`${String(p)}: writes go to the plugin's data folder (${load.dataDir})`)
        return resolved
      }
      vm.fn(fsObj, "writeFile", (p, data) => vm.bridge(async () => fs.promises.writeFile(inData(p), String(data))))
      vm.fn(fsObj, "mkdir", (p) => vm.bridge(async () => void (await fs.promises.mkdir(inData(p), { recursive: true }))))
      vm.fn(fsObj, "rm", (p) => vm.bridge(async () => fs.promises.rm(inData(p), { recursive: true, force: true })))
      ctx.setProp(fsObj, "dataDir", ctx.newString(load.dataDir))
    }
    ctx.setProp(g, "fs", fsObj)
    fsObj.dispose()
  }
  if (granted.has("env")) {
    const proc = ctx.newObject()
    const env = vm.toVm({ ...process.env })
    ctx.setProp(proc, "env", env)
    env.dispose()
    ctx.setProp(g, "process", proc)
    proc.dispose()
    ctx.unwrapResult(ctx.evalCode("Object.freeze(process.env); Object.freeze(process)", "gateway:env")).dispose()
  }
  if (granted.has("exec")) {
    vm.fn(g, "exec", (command, args) =>
      vm.bridge(
        () =>
          new Promise((resolve, reject) =>
            execFile(
              String(command),
              Array.isArray(args) ? args.map(String) : [],
              { encoding: "utf8", timeout: 60_000 },
              (error, stdout, stderr) =>
                error && typeof error.code !== "number" ? reject(error) : resolve({ code: error ? error.code : 0, stdout, stderr })
            )
          )
      )
    )
    vm.fn(g, "execSync", (command, args) => {
      try {
        return ctx.newString(
          execFileSync(String(command), Array.isArray(args) ? args.map(String) : [], { encoding: "utf8", timeout: 10_000 })
        )
      } catch (e) {
        throw ctx.newError((e as Error).message)
      }
    })
  }
  const config = vm.toVm(load.config)
  ctx.setProp(g, "__pluginConfig", config)
  config.dispose()
}

const load = async (req: LoadRequest): Promise<void> => {
  const vm = await SandboxVm.create({
    dir: req.dir,
    memoryLimitBytes: req.memoryLimitBytes,
    who: "the plugin",
    modules: { [SDK_MODULE]: req.sdkSource },
    importsOnly: `a plugin imports only ${SDK_MODULE} and its own files (./lib.mjs)`
  })
  sandbox = vm
  const ctx = vm.ctx
  toPromise = ctx.unwrapResult(ctx.evalCode("(v) => Promise.resolve(v)"))
  defineGlobals(vm, req)
  const ns = await vm.evaluateModule(req.main, req.timeoutMs)
  // The SDK read its configuration when the module graph evaluated: the global it came by goes.
  ctx.unwrapResult(ctx.evalCode("delete globalThis.__pluginConfig", "gateway:config")).dispose()
  plugin = ctx.getProp(ns, "default")
  if (ctx.typeof(plugin) !== "object") throw new Error(`${req.main} must default-export what definePlugin returns`)
  const described = ctx.dump(plugin) as Record<string, unknown>
  const hooks = PLUGIN_HOOKS.filter((h) => ctx.typeof(ctx.getProp(plugin!, h)) === "function")
  send({
    t: "loaded",
    name: String(described["name"] ?? ""),
    priority: Number(described["priority"] ?? 100),
    enabled: described["enabled"] !== false,
    hooks
  })
}

const call = async (id: number, hook: string, ctxValue: unknown, timeoutMs: number): Promise<void> => {
  if (sandbox === undefined || plugin === undefined) return void send({ t: "failed", id, message: "the plugin is not loaded" })
  const vm = sandbox
  const ctx = vm.ctx
  const f = ctx.getProp(plugin, hook)
  if (ctx.typeof(f) !== "function") {
    f.dispose()
    return void send({ t: "result", id, value: null })
  }
  vm.limitTime(timeoutMs)
  const arg = vm.toVm(ctxValue)
  const r = ctx.callFunction(f, plugin, arg)
  f.dispose()
  if (arg !== ctx.undefined) arg.dispose()
  if (r.error) {
    const e = ctx.dump(r.error)
    r.error.dispose()
    return void send({ t: "failed", id, message: vm.reason(e) })
  }
  try {
    // A sync result is wrapped in a promise so both settle the same way (the wrapper made once, at load).
    const p = ctx.unwrapResult(ctx.callFunction(toPromise!, ctx.undefined, r.value))
    r.value.dispose()
    const value = await vm.settle(p, timeoutMs)
    p.dispose()
    send({ t: "result", id, value: value === undefined ? null : value })
  } catch (e) {
    send({ t: "failed", id, message: e instanceof Error ? e.message : String(e) })
  }
}

process.on("message", (m: ParentMessage) => {
  if (m.t === "load")
    load(m).catch((e: unknown) => {
      send({ t: "error", message: e instanceof Error ? e.message : String(e) })
      process.exitCode = 1
      process.disconnect?.()
    })
  else if (m.t === "call")
    call(m.id, m.hook, m.ctx, m.timeoutMs).catch((e: unknown) => {
      // The VM could not even report its failure (out of memory while making the error): said here.
      send({ t: "failed", id: m.id, message: e instanceof Error ? e.message : String(e) })
    })
})
process.on("disconnect", () => process.exit(0))
