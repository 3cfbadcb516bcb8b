/**
 * One plugin's process (docs/plugins.md, "The sandbox"). Started by `spawnPluginProcess`
 * (./process.ts) with Node's permission model, it evaluates the plugin in a QuickJS context of its
 * own (quickjs-emscripten: a separate JavaScript engine compiled to WebAssembly, so nothing of
 * Node exists in it unless it is put there), whose globals are built from the granted permissions
 * only, and answers the gateway's hook calls over IPC.
 *
 * What the plugin's code can reach is what this file puts into its context: the SDK module
 * (`gateway/plugin-sdk`), its own files as modules, `console`, and per permission `fetch` and
 * friends (`network`), `fs` reads (`file-read`), `fs` writes in its data folder (`file-write`),
 * `process.env` (`env`), `exec`/`execSync` (`exec`). The process's permission model is the second
 * wall: without `file-read` it may read only its own folder and the sandbox's code, without
 * `file-write` write nothing, without `exec` start no process, and never load an addon or start a
 * worker.
 */
import { execFile, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { getQuickJS, type QuickJSContext, type QuickJSHandle, type QuickJSRuntime } from "quickjs-emscripten"
import { type ChildMessage, type LoadRequest, type ParentMessage, PLUGIN_HOOKS, type PluginPermission, SDK_MODULE } from "./protocol.js"

const send = (m: ChildMessage) => process.send?.(m)

let runtime: QuickJSRuntime | undefined
let vm: QuickJSContext | undefined
let plugin: QuickJSHandle | undefined
/** `(v) => Promise.resolve(v)` in the VM. */
let toPromise: QuickJSHandle | undefined
/** Host operations (fetch, exec, fs) whose VM promises are still open. */
let pending = 0
let wake: (() => void) | undefined
let deadline = Number.POSITIVE_INFINITY
let interruptedBy: "time" | "memory" | undefined

/** A VM error's message, saying which limit interrupted it. */
const reason = (e: unknown): string => {
  const message = typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e)
  const by = interruptedBy
  interruptedBy = undefined
  return by === "memory" ? `${message}: the plugin went over its memory limit` : by === "time" ? `${message}: the plugin went over its time limit` : message
}

const hostDone = () => {
  pending--
  wake?.()
}

/** The module name a plugin's import resolves to: the SDK, or a file inside its folder. */
/** A refused import's module name (no file path starts so): the loader answers it with this error (a throw from the normalizer loses its message). */
const REFUSED = "gateway:refused:"

const normalize =
  (dir: string) =>
  (base: string, requested: string): string => {
    if (requested === SDK_MODULE) return SDK_MODULE
    if (!requested.startsWith("./") && !requested.startsWith("../"))
      return `${REFUSED}cannot import ${JSON.stringify(requested)}: a plugin imports only ${SDK_MODULE} and its own files (./lib.mjs)`
    const from = base === SDK_MODULE ? dir : path.dirname(base)
    const resolved = path.resolve(from, requested)
    if (resolved !== dir && !resolved.startsWith(`${dir}${path.sep}`)) return `${REFUSED}cannot import ${JSON.stringify(requested)}: it is outside the plugin's folder`
    return resolved
  }

const toVm = (ctx: QuickJSContext, value: unknown): QuickJSHandle => {
  if (value === undefined) return ctx.undefined
  const r = ctx.evalCode(`(${JSON.stringify(JSON.stringify(value))})`)
  const text = ctx.unwrapResult(r)
  const parse = ctx.getProp(ctx.global, "JSON")
  const fn = ctx.getProp(parse, "parse")
  const out = ctx.unwrapResult(ctx.callFunction(fn, parse, text))
  text.dispose()
  fn.dispose()
  parse.dispose()
  return out
}

/** A VM promise settled by a host promise (counted, so the call loop waits for it). */
const bridge = (ctx: QuickJSContext, work: () => Promise<unknown>): QuickJSHandle => {
  const promise = ctx.newPromise()
  pending++
  work().then(
    (value) => {
      if (ctx.alive) {
        const h = toVm(ctx, value)
        promise.resolve(h)
        if (h !== ctx.undefined) h.dispose()
      }
      hostDone()
    },
    (error: unknown) => {
      if (ctx.alive) {
        const e = ctx.newError(error instanceof Error ? error.message : String(error))
        promise.reject(e)
        e.dispose()
      }
      hostDone()
    }
  )
  promise.settled.then(() => runtime?.executePendingJobs())
  return promise.handle
}

const fn = (ctx: QuickJSContext, target: QuickJSHandle, name: string, impl: (...args: Array<unknown>) => QuickJSHandle | undefined) => {
  const f = ctx.newFunction(name, (...handles) => impl(...handles.map((h) => ctx.dump(h))))
  ctx.setProp(target, name, f)
  f.dispose()
}

/** In-VM helpers for the `network` permission (classes over the bridged `__hostFetch`). */
const NETWORK_PRELUDE = `
class Headers {
  constructor(init) { this._h = {}; if (init) for (const [k, v] of Object.entries(init instanceof Headers ? init._h : init)) this._h[String(k).toLowerCase()] = String(v) }
  get(k) { const v = this._h[String(k).toLowerCase()]; return v === undefined ? null : v }
  set(k, v) { this._h[String(k).toLowerCase()] = String(v) }
  has(k) { return String(k).toLowerCase() in this._h }
  delete(k) { delete this._h[String(k).toLowerCase()] }
  forEach(f) { for (const [k, v] of Object.entries(this._h)) f(v, k, this) }
  entries() { return Object.entries(this._h)[Symbol.iterator]() }
}
class Response {
  constructor(body, init) { init = init || {}; this._body = body == null ? "" : String(body); this.status = init.status || 200; this.statusText = init.statusText || ""; this.headers = new Headers(init.headers); this.ok = this.status >= 200 && this.status < 300; this.url = init.url || "" }
  async text() { return this._body }
  async json() { return JSON.parse(this._body) }
}
class Request {
  constructor(url, init) { init = init || {}; this.url = String(url); this.method = (init.method || "GET").toUpperCase(); this.headers = new Headers(init.headers); this.body = init.body == null ? undefined : String(init.body) }
}
class AbortController {
  constructor() { this.signal = { aborted: false, reason: undefined } }
  abort(reason) { this.signal.aborted = true; this.signal.reason = reason }
}
globalThis.Headers = Headers
globalThis.Response = Response
globalThis.Request = Request
globalThis.AbortController = AbortController
globalThis.fetch = async (input, init) => {
  const req = input instanceof Request ? input : new Request(input, init)
  if (init && init.signal && init.signal.aborted) throw new Error("the request was aborted")
  const r = await __hostFetch(req.url, req.method, req.headers._h, req.body)
  return new Response(r.body, { status: r.status, statusText: r.statusText, headers: r.headers, url: r.url })
}
`

const defineGlobals = (ctx: QuickJSContext, load: LoadRequest) => {
  const granted = new Set<PluginPermission>(load.permissions)
  const g = ctx.global
  const consoleObj = ctx.newObject()
  for (const level of ["log", "info", "warn", "error", "debug"] as const)
    fn(ctx, consoleObj, level, (...args) => {
      send({ t: "log", level, text: args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ") })
      return undefined
    })
  ctx.setProp(g, "console", consoleObj)
  consoleObj.dispose()

  if (granted.has("network")) {
    fn(ctx, g, "__hostFetch", (url, method, headers, body) =>
      bridge(ctx, async () => {
        const res = await fetch(String(url), {
          method: String(method),
          headers: headers as Record<string, string>,
          ...(body !== undefined && body !== null ? { body: String(body) } : {})
        })
        return { status: res.status, statusText: res.statusText, headers: Object.fromEntries(res.headers), body: await res.text(), url: res.url }
      })
    )
    ctx.unwrapResult(ctx.evalCode(NETWORK_PRELUDE, "gateway:network")).dispose()
  }
  const needsFs = granted.has("file-read") || granted.has("file-write")
  if (needsFs) {
    const fsObj = ctx.newObject()
    if (granted.has("file-read")) {
      fn(ctx, fsObj, "readFile", (p, encoding) => bridge(ctx, () => fs.promises.readFile(String(p), (encoding as BufferEncoding | undefined) ?? "utf8")))
      fn(ctx, fsObj, "readdir", (p) => bridge(ctx, () => fs.promises.readdir(String(p))))
      fn(ctx, fsObj, "stat", (p) =>
        bridge(ctx, async () => {
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
      fn(ctx, fsObj, "writeFile", (p, data) => bridge(ctx, async () => fs.promises.writeFile(inData(p), String(data))))
      fn(ctx, fsObj, "mkdir", (p) => bridge(ctx, async () => void (await fs.promises.mkdir(inData(p), { recursive: true }))))
      fn(ctx, fsObj, "rm", (p) => bridge(ctx, async () => fs.promises.rm(inData(p), { recursive: true, force: true })))
      ctx.setProp(fsObj, "dataDir", ctx.newString(load.dataDir))
    }
    ctx.setProp(g, "fs", fsObj)
    fsObj.dispose()
  }
  if (granted.has("env")) {
    const proc = ctx.newObject()
    const env = toVm(ctx, { ...process.env })
    ctx.setProp(proc, "env", env)
    env.dispose()
    ctx.setProp(g, "process", proc)
    proc.dispose()
    ctx.unwrapResult(ctx.evalCode("Object.freeze(process.env); Object.freeze(process)", "gateway:env")).dispose()
  }
  if (granted.has("exec")) {
    fn(ctx, g, "exec", (command, args) =>
      bridge(
        ctx,
        () =>
          new Promise((resolve, reject) =>
            execFile(String(command), Array.isArray(args) ? args.map(String) : [], { encoding: "utf8", timeout: 60_000 }, (error, stdout, stderr) =>
              error && typeof error.code !== "number" ? reject(error) : resolve({ code: error ? error.code : 0, stdout, stderr })
            )
          )
      )
    )
    fn(ctx, g, "execSync", (command, args) => {
      try {
        return ctx.newString(execFileSync(String(command), Array.isArray(args) ? args.map(String) : [], { encoding: "utf8", timeout: 10_000 }))
      } catch (e) {
        throw ctx.newError((e as Error).message)
      }
    })
  }
  const config = toVm(ctx, load.config)
  ctx.setProp(g, "__pluginConfig", config)
  config.dispose()
}

/** Runs the VM's jobs until `promise` settles (host work awaited between rounds) or the deadline passes. */
const settle = async (ctx: QuickJSContext, promise: QuickJSHandle, timeoutMs: number): Promise<unknown> => {
  const until = Date.now() + timeoutMs
  for (;;) {
    deadline = until
    const jobs = runtime!.executePendingJobs()
    if (jobs.error) {
      const e = ctx.dump(jobs.error)
      jobs.error.dispose()
      throw new Error(reason(e))
    }
    const state = ctx.getPromiseState(promise)
    if (state.type === "fulfilled") {
      const value = ctx.dump(state.value)
      state.value.dispose()
      return value
    }
    if (state.type === "rejected") {
      const e = ctx.dump(state.error)
      state.error.dispose()
      throw new Error(reason(e))
    }
    if (Date.now() > until) throw new Error(`did not finish in ${timeoutMs} ms`)
    if (pending === 0) throw new Error("never settles: its promise waits on nothing")
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, until - Date.now())
      wake = () => {
        clearTimeout(timer)
        resolve()
      }
    })
    wake = undefined
  }
}

const load = async (req: LoadRequest): Promise<void> => {
  const QuickJS = await getQuickJS()
  runtime = QuickJS.newRuntime()
  // QuickJS's own heap limit does not count what this WebAssembly build allocates for typed arrays
  // and strings (measured: 2 GB of Uint8Arrays under a 64 MB limit), so the limit is the process's
  // resident memory, checked where QuickJS checks for interrupts.
  runtime.setMemoryLimit(req.memoryLimitBytes)
  runtime.setMaxStackSize(1024 * 1024)
  runtime.setInterruptHandler(() => {
    if (Date.now() > deadline) {
      interruptedBy = "time"
      return true
    }
    if (process.memoryUsage.rss() > req.memoryLimitBytes) {
      interruptedBy = "memory"
      return true
    }
    return false
  })
  const dir = path.resolve(req.dir)
  runtime.setModuleLoader(
    (name) => {
      if (name === SDK_MODULE) return req.sdkSource
      if (name.startsWith(REFUSED)) return { error: new Error(name.slice(REFUSED.length)) }
      try {
        return fs.readFileSync(name, "utf8")
      } catch (e) {
        return { error: new Error(`${path.relative(dir, name)}: ${(e as Error).message}`) }
      }
    },
    (base, requested) => normalize(dir)(base, requested)
  )
  vm = runtime.newContext()
  toPromise = vm.unwrapResult(vm.evalCode("(v) => Promise.resolve(v)"))
  defineGlobals(vm, req)
  const main = path.resolve(dir, req.main)
  if (!main.startsWith(`${dir}${path.sep}`)) throw new Error(`main ${req.main} is outside the plugin's folder`)
  deadline = Date.now() + req.timeoutMs
  const evaluated = vm.evalCode(fs.readFileSync(main, "utf8"), main, { type: "module" })
  if (evaluated.error) {
    const e = vm.dump(evaluated.error)
    evaluated.error.dispose()
    throw new Error(typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e))
  }
  const nsPromise = evaluated.value
  const pendingNs = vm.getPromiseState(nsPromise)
  let ns: QuickJSHandle
  if (pendingNs.type === "pending") {
    await settle(vm, nsPromise, req.timeoutMs)
    const again = vm.getPromiseState(nsPromise)
    if (again.type !== "fulfilled") throw new Error("the plugin module did not load")
    ns = again.value
  } else if (pendingNs.type === "fulfilled") ns = pendingNs.value
  else {
    const e = vm.dump(pendingNs.error)
    throw new Error(String((e as { message?: unknown })?.message ?? e))
  }
  // The SDK read its configuration when the module graph evaluated: the global it came by goes.
  vm.unwrapResult(vm.evalCode("delete globalThis.__pluginConfig", "gateway:config")).dispose()
  plugin = vm.getProp(ns, "default")
  if (vm.typeof(plugin) !== "object") throw new Error(`${req.main} must default-export what definePlugin returns`)
  const described = vm.dump(plugin) as Record<string, unknown>
  const hooks = PLUGIN_HOOKS.filter((h) => vm!.typeof(vm!.getProp(plugin!, h)) === "function")
  send({ t: "loaded", name: String(described["name"] ?? ""), priority: Number(described["priority"] ?? 100), enabled: described["enabled"] !== false, hooks })
}

const call = async (id: number, hook: string, ctxValue: unknown, timeoutMs: number): Promise<void> => {
  if (vm === undefined || plugin === undefined) return void send({ t: "failed", id, message: "the plugin is not loaded" })
  const f = vm.getProp(plugin, hook)
  if (vm.typeof(f) !== "function") {
    f.dispose()
    return void send({ t: "result", id, value: null })
  }
  deadline = Date.now() + timeoutMs
  const arg = toVm(vm, ctxValue)
  const r = vm.callFunction(f, plugin, arg)
  f.dispose()
  if (arg !== vm.undefined) arg.dispose()
  if (r.error) {
    const e = vm.dump(r.error)
    r.error.dispose()
    return void send({ t: "failed", id, message: reason(e) })
  }
  try {
    // A sync result is wrapped in a promise so both settle the same way (the wrapper made once, at load).
    const p = vm.unwrapResult(vm.callFunction(toPromise!, vm.undefined, r.value))
    r.value.dispose()
    const value = await settle(vm, p, timeoutMs)
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
