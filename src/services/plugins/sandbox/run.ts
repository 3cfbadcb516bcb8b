/**
 * One skill script run to its end, in a QuickJS context whose only globals are a small `process`, `console`, read-only
 * `fs` inside its folder and `fetch` as its run allows (docs/skills.md#scripts).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { hostAllowed, targetOf } from "./hosts.js"
import type { RunMessage, RunRequest } from "./protocol.js"
import { SandboxVm } from "./vm.js"

const send = (m: RunMessage) => process.send?.(m)

/** What `process` is inside the VM, over the host functions `__write` and `__exit`. */
const PROCESS_PRELUDE = `
globalThis.process = {
  argv: __argv,
  stdin: __stdin,
  stdout: { write: (text) => (__write("stdout", String(text)), true) },
  stderr: { write: (text) => (__write("stderr", String(text)), true) },
  exitCode: undefined,
  exit: (code) => __exit(code === undefined ? process.exitCode : Number(code))
}
delete globalThis.__argv
delete globalThis.__stdin
`

const run = async (req: RunRequest): Promise<void> => {
  const dir = path.resolve(req.dir)
  const realDir = fs.realpathSync(dir)
  const vm = await SandboxVm.create({
    dir,
    memoryLimitBytes: req.memoryLimitBytes,
    who: "the script",
    importsOnly: "a script imports only its own files (./lib.mjs)"
  })
  const ctx = vm.ctx
  const g = ctx.global
  const write = (stream: "stdout" | "stderr", text: string) => send({ t: "out", stream, text })
  vm.defineConsole((level, text) => write(level === "warn" || level === "error" ? "stderr" : "stdout", `${text}\n`))

  let exitRequested: number | undefined
  const argv = vm.toVm(["quickjs", req.script, ...req.argv])
  ctx.setProp(g, "__argv", argv)
  argv.dispose()
  const stdin = ctx.newString(req.stdin)
  ctx.setProp(g, "__stdin", stdin)
  stdin.dispose()
  vm.fn(g, "__write", (stream, text) => {
    write(stream === "stderr" ? "stderr" : "stdout", String(text))
    return undefined
  })
  vm.fn(g, "__exit", (code) => {
    exitRequested = typeof code === "number" && Number.isInteger(code) ? code : 0
    vm.stop(`process.exit(${exitRequested})`)
    throw ctx.newError(`process.exit(${exitRequested})`)
  })
  ctx.unwrapResult(ctx.evalCode(PROCESS_PRELUDE, "gateway:process")).dispose()

  // Files: inside the folder only (the process's permission model is the second wall).
  const inside = async (p: unknown): Promise<string> => {
    const resolved = path.resolve(dir, String(p))
    const real = await fs.promises.realpath(resolved).catch(() => resolved)
    if (real !== realDir && !real.startsWith(`${realDir}${path.sep}`))
      throw new Error(`${String(p)}: outside the script's folder; a script reads only its skill's files`)
    return real
  }
  const fsObj = ctx.newObject()
  vm.fn(fsObj, "readFile", (p, encoding) =>
    vm.bridge(async () => fs.promises.readFile(await inside(p), (encoding as BufferEncoding | undefined) ?? "utf8"))
  )
  vm.fn(fsObj, "readdir", (p) => vm.bridge(async () => fs.promises.readdir(await inside(p ?? "."))))
  vm.fn(fsObj, "stat", (p) =>
    vm.bridge(async () => {
      const s = await fs.promises.stat(await inside(p))
      return { size: s.size, isFile: s.isFile(), isDirectory: s.isDirectory(), mtimeMs: s.mtimeMs }
    })
  )
  ctx.setProp(g, "fs", fsObj)
  fsObj.dispose()

  vm.defineFetch(async (url, method, headers, body) => {
    const t = targetOf(url)
    if ("refused" in t) throw new Error(`fetch ${url}: ${t.refused}`)
    const allowed = req.networkOff === null && hostAllowed(url, req.hosts)
    send({ t: "fetch", target: t.target, allowed })
    if (req.networkOff !== null) throw new Error(`fetch ${url}: ${req.networkOff}`)
    if (!allowed)
      throw new Error(
        `fetch ${url}: ${t.target} is not one of the hosts this script may reach (${req.hosts.length > 0 ? req.hosts.join(", ") : "none are named"})`
      )
    // Redirects are not followed: the script gets the 3xx and may fetch its Location, checked again.
    const res = await fetch(url, { method, headers, redirect: "manual", ...(body !== undefined ? { body } : {}) })
    return { status: res.status, statusText: res.statusText, headers: Object.fromEntries(res.headers), body: await res.text(), url }
  })

  try {
    const ns = await vm.evaluateModule(req.script, req.timeoutMs)
    ns.dispose()
  } catch (e) {
    if (exitRequested === undefined) {
      const error = e instanceof Error ? e.message : String(e)
      return void send(
        vm.limitHit === undefined
          ? { t: "done", exitCode: 1, error, stopped: null }
          : { t: "done", exitCode: null, error, stopped: vm.limitHit }
      )
    }
  }
  if (exitRequested !== undefined) return void send({ t: "done", exitCode: exitRequested, error: null, stopped: null })
  const code = ctx.dump(ctx.unwrapResult(ctx.evalCode("typeof process === 'object' && process !== null ? process.exitCode : undefined")))
  send({ t: "done", exitCode: typeof code === "number" && Number.isInteger(code) ? code : 0, error: null, stopped: null })
}

process.on("message", (m: RunRequest) => {
  if (m.t !== "run") return
  run(m)
    .catch((e: unknown) => send({ t: "done", exitCode: null, error: e instanceof Error ? e.message : String(e), stopped: null }))
    .finally(() => process.disconnect?.())
})
process.on("disconnect", () => process.exit(0))
