/**
 * The inside of a sandbox process (docs/plugins.md, "The sandbox"): one QuickJS context
 * (quickjs-emscripten: a separate JavaScript engine compiled to WebAssembly, so nothing of Node
 * exists in it unless it is put there) with a time and a memory limit, modules only from one
 * folder, and host work (fetch, file reads) bridged in as VM promises. A plugin's process
 * (./child.ts) and a skill script's run (./run.ts) each make one and put their own globals in it.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { getQuickJS, type QuickJSContext, type QuickJSHandle, type QuickJSRuntime } from "quickjs-emscripten"

/** A refused import's module name (no file path starts so): the loader answers it with this error (a throw from the normalizer loses its
 * message). */
const REFUSED = "gateway:refused:"

export interface SandboxVmOptions {
  /** The folder (absolute) the code's relative imports may reach. */
  readonly dir: string
  /** The process's resident memory past which the code is interrupted (also QuickJS's own heap limit). */
  readonly memoryLimitBytes: number
  /** Who runs, for messages: "the plugin", "the script". */
  readonly who: string
  /** Bare module names the code may import, with their source (the plugin SDK). */
  readonly modules?: Readonly<Record<string, string>>
  /** What a refused import says the code may import ("a plugin imports only ..."). */
  readonly importsOnly: string
}

/** What a fetch from inside the VM answers (NETWORK_PRELUDE turns it into a Response). */
export interface HostResponse {
  readonly status: number
  readonly statusText: string
  readonly headers: Record<string, string>
  readonly body: string
  readonly url: string
}

export type HostFetch = (url: string, method: string, headers: Record<string, string>, body: string | undefined) => Promise<HostResponse>

/** In-VM `fetch` and friends: classes over the bridged `__hostFetch`. */
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

const messageOf = (e: unknown): string =>
  typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e)

export class SandboxVm {
  /** Host operations (fetch, fs) whose VM promises are still open. */
  private pending = 0
  private wake: (() => void) | undefined
  private deadline = Number.POSITIVE_INFINITY
  private interruptedBy: "time" | "memory" | "stop" | undefined
  private stopReason: string | undefined
  /** The limit that stopped the code, once one did. */
  limitHit: "time" | "memory" | undefined

  private constructor(
    readonly runtime: QuickJSRuntime,
    readonly ctx: QuickJSContext,
    private readonly opts: SandboxVmOptions
  ) {}

  static readonly create = async (opts: SandboxVmOptions): Promise<SandboxVm> => {
    const QuickJS = await getQuickJS()
    const runtime = QuickJS.newRuntime()
    // QuickJS's own heap limit does not count what this WebAssembly build allocates for typed arrays
    // and strings (measured: 2 GB of Uint8Arrays under a 64 MB limit), so the limit is the process's
    // resident memory, checked where QuickJS checks for interrupts.
    runtime.setMemoryLimit(opts.memoryLimitBytes)
    runtime.setMaxStackSize(1024 * 1024)
    const dir = path.resolve(opts.dir)
    const modules = opts.modules ?? {}
    const normalize = (base: string, requested: string): string => {
      if (Object.hasOwn(modules, requested)) return requested
      if (!requested.startsWith("./") && !requested.startsWith("../"))
        return `${REFUSED}cannot import ${JSON.stringify(requested)}: ${opts.importsOnly}`
      const from = Object.hasOwn(modules, base) ? dir : path.dirname(base)
      const resolved = path.resolve(from, requested)
      if (resolved !== dir && !resolved.startsWith(`${dir}${path.sep}`))
        return `${REFUSED}cannot import ${JSON.stringify(requested)}: it is outside ${opts.who}'s folder`
      return resolved
    }
    runtime.setModuleLoader((name) => {
      if (Object.hasOwn(modules, name)) return modules[name]!
      if (name.startsWith(REFUSED)) return { error: new Error(name.slice(REFUSED.length)) }
      try {
        return fs.readFileSync(name, "utf8")
      } catch (e) {
        return { error: new Error(`${path.relative(dir, name)}: ${(e as Error).message}`) }
      }
    }, normalize)
    const vm = new SandboxVm(runtime, runtime.newContext(), { ...opts, dir })
    runtime.setInterruptHandler(() => vm.interrupt())
    return vm
  }

  private interrupt(): boolean {
    if (this.stopReason !== undefined) {
      this.interruptedBy = "stop"
      return true
    }
    if (Date.now() > this.deadline) {
      this.interruptedBy = "time"
      return true
    }
    if (process.memoryUsage.rss() > this.opts.memoryLimitBytes) {
      this.interruptedBy = "memory"
      return true
    }
    return false
  }

  /** From now on the code runs until `timeoutMs` from now. */
  limitTime(timeoutMs: number): void {
    this.deadline = Date.now() + timeoutMs
  }

  /** Stops the code at its next instruction (`process.exit`): what it still runs is interrupted. */
  stop(why: string): void {
    this.stopReason = why
    this.wake?.()
  }

  /** A VM error's message, saying which limit interrupted it. */
  reason(e: unknown): string {
    const message = messageOf(e)
    const by = this.interruptedBy
    this.interruptedBy = undefined
    if (by === "time" || by === "memory") this.limitHit = by
    if (by === "memory") return `${message}: ${this.opts.who} went over its memory limit`
    if (by === "time") return `${message}: ${this.opts.who} went over its time limit`
    if (by === "stop") return this.stopReason ?? message
    return message
  }

  toVm(value: unknown): QuickJSHandle {
    const ctx = this.ctx
    if (value === undefined) return ctx.undefined
    const text = ctx.unwrapResult(ctx.evalCode(`(${JSON.stringify(JSON.stringify(value))})`))
    const json = ctx.getProp(ctx.global, "JSON")
    const parse = ctx.getProp(json, "parse")
    const out = ctx.unwrapResult(ctx.callFunction(parse, json, text))
    text.dispose()
    parse.dispose()
    json.dispose()
    return out
  }

  /** A VM promise settled by a host promise (counted, so `settle` waits for it). */
  bridge(work: () => Promise<unknown>): QuickJSHandle {
    const ctx = this.ctx
    const promise = ctx.newPromise()
    const done = () => {
      this.pending--
      this.wake?.()
    }
    this.pending++
    work().then(
      (value) => {
        if (ctx.alive) {
          const h = this.toVm(value)
          promise.resolve(h)
          if (h !== ctx.undefined) h.dispose()
        }
        done()
      },
      (error: unknown) => {
        if (ctx.alive) {
          const e = ctx.newError(error instanceof Error ? error.message : String(error))
          promise.reject(e)
          e.dispose()
        }
        done()
      }
    )
    promise.settled.then(() => this.runtime.executePendingJobs())
    return promise.handle
  }

  /** A host function on `target`, called with its arguments as plain values. */
  fn(target: QuickJSHandle, name: string, impl: (...args: Array<unknown>) => QuickJSHandle | undefined): void {
    const f = this.ctx.newFunction(name, (...handles) => impl(...handles.map((h) => this.ctx.dump(h))))
    this.ctx.setProp(target, name, f)
    f.dispose()
  }

  /** `console.*`, each line handed to `write`. */
  defineConsole(write: (level: "log" | "info" | "warn" | "error" | "debug", text: string) => void): void {
    const consoleObj = this.ctx.newObject()
    for (const level of ["log", "info", "warn", "error", "debug"] as const)
      this.fn(consoleObj, level, (...args) => {
        write(level, args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "))
        return undefined
      })
    this.ctx.setProp(this.ctx.global, "console", consoleObj)
    consoleObj.dispose()
  }

  /** `fetch`, `Headers`, `Request`, `Response`, `AbortController`; every request goes to `hostFetch`. */
  defineFetch(hostFetch: HostFetch): void {
    this.fn(this.ctx.global, "__hostFetch", (url, method, headers, body) =>
      this.bridge(() =>
        hostFetch(
          String(url),
          String(method),
          headers as Record<string, string>,
          body === undefined || body === null ? undefined : String(body)
        )
      )
    )
    this.ctx.unwrapResult(this.ctx.evalCode(NETWORK_PRELUDE, "gateway:network")).dispose()
  }

  /** Runs the VM's jobs until `promise` settles (host work awaited between rounds) or `timeoutMs` passes. */
  async settle(promise: QuickJSHandle, timeoutMs: number): Promise<unknown> {
    const ctx = this.ctx
    const until = Date.now() + timeoutMs
    for (;;) {
      this.deadline = until
      const jobs = this.runtime.executePendingJobs()
      if (jobs.error) {
        const e = ctx.dump(jobs.error)
        jobs.error.dispose()
        throw new Error(this.reason(e))
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
        throw new Error(this.reason(e))
      }
      if (this.stopReason !== undefined) throw new Error(this.stopReason)
      if (Date.now() > until) {
        this.limitHit = "time"
        throw new Error(`did not finish in ${timeoutMs} ms`)
      }
      if (this.pending === 0) throw new Error("never settles: its promise waits on nothing")
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, until - Date.now())
        this.wake = () => {
          clearTimeout(timer)
          resolve()
        }
      })
      this.wake = undefined
    }
  }

  /** Evaluates `file` (inside the folder) as a module within `timeoutMs`: its namespace. */
  async evaluateModule(file: string, timeoutMs: number): Promise<QuickJSHandle> {
    const ctx = this.ctx
    const main = path.resolve(this.opts.dir, file)
    if (!main.startsWith(`${this.opts.dir}${path.sep}`)) throw new Error(`${file} is outside ${this.opts.who}'s folder`)
    this.deadline = Date.now() + timeoutMs
    const evaluated = ctx.evalCode(fs.readFileSync(main, "utf8"), main, { type: "module" })
    if (evaluated.error) {
      const e = ctx.dump(evaluated.error)
      evaluated.error.dispose()
      throw new Error(this.reason(e))
    }
    const nsPromise = evaluated.value
    const first = ctx.getPromiseState(nsPromise)
    if (first.type === "fulfilled") return first.value
    if (first.type === "rejected") {
      const e = ctx.dump(first.error)
      first.error.dispose()
      throw new Error(this.reason(e))
    }
    await this.settle(nsPromise, timeoutMs)
    const again = ctx.getPromiseState(nsPromise)
    if (again.type !== "fulfilled") throw new Error(`${file} did not load`)
    return again.value
  }
}
