import { type ChildProcess, spawn } from "node:child_process"
import { createRequire } from "node:module"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { Agent, fetch as undiciFetch } from "undici"
import type { ChildOptions, ChildReady } from "./gatewayChild.main.js"
import { cleanEnv } from "./cli.js"

export type { ChildOptions }

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const MAIN = path.join(ROOT, "test/support/gatewayChild.main.ts")
/** vite-node (vitest's own runner, installed with it) runs the TypeScript sources as vitest does. */
const VITE_NODE = path.join(path.dirname(createRequire(import.meta.url).resolve("vite-node/package.json")), "vite-node.mjs")

export interface GatewayChild extends ChildReady {
  /** The lines the process printed after it was ready (DNS queries its server answered). */
  readonly lines: Array<Record<string, any>>
  /**
   * One request to the gateway, JSON in and out: over TCP, or over `socket` when the process runs
   * in a network namespace this one cannot reach.
   */
  call(
    path: string,
    init?: { method?: string; body?: unknown; headers?: Record<string, string> }
  ): Promise<{ status: number; headers: Headers; body: any; text: string }>
  stop(): Promise<void>
}

const running = new Set<ChildProcess>()
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

/**
 * Starts test/support/gatewayChild.main.ts in a process of its own with `env` (a clean
 * environment plus it), behind `prefix` (`ip netns exec <ns>`), and waits until it is ready.
 */
export const startGatewayChild = async (
  options: ChildOptions,
  run: { readonly env?: Record<string, string>; readonly prefix?: ReadonlyArray<string>; readonly startMs?: number } = {}
): Promise<GatewayChild> => {
  const [cmd, ...args] = [...(run.prefix ?? []), process.execPath, VITE_NODE, "--root", ROOT, MAIN]
  const child = spawn(cmd!, args, {
    cwd: ROOT,
    env: cleanEnv({ ...run.env, GATEWAY_CHILD_OPTIONS: JSON.stringify(options) }),
    stdio: ["ignore", "pipe", "pipe"]
  })
  running.add(child)
  let stderr = ""
  child.stderr!.on("data", (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)))
  const lines: Array<Record<string, any>> = []
  const exited = new Promise<void>((resolve) =>
    child.once("close", () => {
      running.delete(child)
      resolve()
    })
  )
  const ready = await new Promise<ChildReady>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the gateway process was not ready within ${run.startMs ?? 60_000} ms:\n${stderr}`)),
      run.startMs ?? 60_000
    )
    void exited.then(() => reject(new Error(`the gateway process exited before it was ready:\n${stderr}`)))
    readline.createInterface({ input: child.stdout! }).on("line", (line) => {
      let o: Record<string, any>
      try {
        o = JSON.parse(line)
      } catch {
        return // a log line
      }
      if (typeof o["url"] === "string") {
        clearTimeout(timer)
        resolve(o as ChildReady)
      } else if (o["dns"] !== undefined) lines.push(o)
    })
  })
  const dispatcher = options.socket === undefined ? undefined : new Agent({ connect: { socketPath: options.socket } })
  return {
    ...ready,
    lines,
    call: async (p, init = {}) => {
      const res = await undiciFetch(`${ready.url}${p}`, {
        method: init.method ?? (init.body === undefined ? "GET" : "POST"),
        headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
        ...(dispatcher ? { dispatcher } : {})
      })
      const text = await res.text()
      let body: any
      try {
        body = text ? JSON.parse(text) : undefined
      } catch {
        body = undefined
      }
      return { status: res.status, headers: res.headers as unknown as Headers, body, text }
    },
    stop: async () => {
      child.kill("SIGTERM")
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000)
      await exited
      clearTimeout(killer)
      await dispatcher?.close()
    }
  }
}
