import * as net from "node:net"
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../bin/gateway")

export interface CliResult {
  readonly code: number | null
  /** Set when the process was killed by a signal (code is then null). */
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** A clean environment: nothing from the developer's shell leaks into the command. */
export const cleanEnv = (env: Record<string, string>): Record<string, string> => ({
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  HOME: process.env.HOME ?? "/tmp",
  NO_COLOR: "1",
  ...env
})

export const runCli = (
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
  options: { readonly prefix?: ReadonlyArray<string>; readonly nodeArgs?: ReadonlyArray<string> } = {}
): Promise<CliResult> =>
  new Promise((resolve, reject) => {
    const [cmd, ...rest] = [...(options.prefix ?? []), process.execPath, ...(options.nodeArgs ?? []), BIN, ...args]
    const child = spawn(cmd!, rest, { env: cleanEnv(env), stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
    child.on("error", reject)
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
  })

export interface ServerProcess {
  readonly url: string
  readonly child: ChildProcess
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string
  /** Sends a signal and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

/**
 * Server processes still running: killed when this test worker exits, so a test that times out
 * before its `finally` cannot leave a gateway running after the suite.
 */
const running = new Set<ChildProcess>()
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

/** Starts `gateway` (the server) as its own process on a free port and waits until it listens (on http or https). */
export const startServerProcess = (
  env: Record<string, string>,
  args: ReadonlyArray<string> = [],
  options: {
    readonly prefix?: ReadonlyArray<string>
    readonly startMs?: number
    /** Node's own options, before the gateway's script (`--import` a preload). */
    readonly nodeArgs?: ReadonlyArray<string>
    /**
     * The port by PORT (a free one) instead of `--port 0`: `gateway` with no argument, as a
     * service starts it (PORT must name a port).
     */
    readonly portByEnv?: number
    /** `--port` this port instead of `--port 0`. */
    readonly port?: number
    /** The script node runs instead of bin/gateway (dist/cli/main.js: the compiled tree, not the bundle). */
    readonly entry?: string
  } = {}
): Promise<ServerProcess> =>
  new Promise((resolve, reject) => {
    const port = options.portByEnv !== undefined ? [] : ["--port", String(options.port ?? 0)]
    const [cmd, ...rest] = [
      ...(options.prefix ?? []),
      process.execPath,
      ...(options.nodeArgs ?? []),
      options.entry ?? BIN,
      ...port,
      ...args
    ]
    const portEnv: Record<string, string> = options.portByEnv !== undefined ? { PORT: String(options.portByEnv), HOST: "127.0.0.1" } : {}
    const child = spawn(cmd!, rest, { env: cleanEnv({ LOG_FORMAT: "json", ...portEnv, ...env }), stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let settled = false
    running.add(child)
    const exited = new Promise<number | null>((r) =>
      child.on("close", (code) => {
        running.delete(child)
        r(code)
      })
    )
    const onData = (c: Buffer) => {
      out += c.toString()
      const m = /listening on (https?:\/\/[^ "]+)/.exec(out)
      if (m && !settled) {
        settled = true
        resolve({
          url: m[1]!,
          child,
          output: () => out,
          stop: async (signal = "SIGTERM") => {
            child.kill(signal)
            return exited
          }
        })
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    void exited.then((code) => {
      if (!settled) {
        settled = true
        reject(new Error(`gateway exited (${code}) before listening:\n${out}`))
      }
    })
    setTimeout(() => {
      if (!settled) {
        settled = true
        child.kill("SIGKILL")
        reject(new Error(`gateway did not start within ${(options.startMs ?? 15_000) / 1000}s:\n${out}`))
      }
    }, options.startMs ?? 15_000)
  })

/** The admin key `setupWithProvider` hands to setup as GATEWAY_API_KEY. */
export const ADMIN_KEY = "sk-gateway-admin-0123456789abcdef"

/**
 * `gateway setup --non-interactive` with an openai-compatible connection to `upstreamBaseUrl`
 * (key sk-up, default model m1) and GATEWAY_API_KEY set to ADMIN_KEY: the README's flow.
 */
export const setupWithProvider = (dataDir: string, upstreamBaseUrl: string, extra: ReadonlyArray<string> = []) =>
  runCli(
    [
      "setup",
      "--non-interactive",
      "--add-provider",
      "--provider",
      "openai-compatible",
      "--provider-base-url",
      upstreamBaseUrl,
      "--api-key",
      "sk-up",
      "--default-model",
      "m1",
      ...extra
    ],
    { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY }
  )

/** A port free on 127.0.0.1 now (for a server told its port by PORT). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = net.createServer().once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })
