import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { AppConfig } from "../../src/platform/config/AppConfig.js"
import { CoreLayer } from "../../src/server/CoreLayer.js"
import { ServerLayer } from "../../src/server/Gateway.js"
import { sequentialLayer } from "../../src/platform/system/buildLayer.js"
import { GatewayServer } from "../../src/kernel/internalCall.js"
import { StreamTimeouts, type StreamTimeoutsShape } from "../../src/inference/StreamTimeouts.js"
import { CircuitBreakers } from "../../src/services/resilience/CircuitBreakers.js"
import { Cooldowns } from "../../src/services/resilience/Cooldowns.js"
import { Lockouts } from "../../src/services/resilience/Lockouts.js"
import { RoutingMemory } from "../../src/services/routing/RoutingMemory.js"
import { SharedState } from "../../src/platform/state/SharedState.js"
import { BatchWriter } from "../../src/platform/store/BatchWriter.js"
import { InFlight } from "../../src/services/usage/InFlight.js"
import { DnsResolver, type Resolve } from "../../src/upstream/client/egressGuard.js"
import { databaseFor, databaseOf, onPostgres } from "./pgStore.js"

export const tempDir = (prefix = "gw-test-"): string => fs.mkdtempSync(path.join(os.tmpdir(), prefix))

/** Log lines captured from an in-process gateway (`message` plus annotations). */
export interface CapturedLog {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
}

export type TestGateway = Awaited<ReturnType<typeof startGateway>>

/**
 * The real gateway (every layer, a real SQLite file, a real HTTP server on 127.0.0.1:0),
 * configured only from `env` (the process environment is not read). With
 * GATEWAY_TEST_STORE=postgres the database is a fresh PostgreSQL one per data directory
 * (test/support/pgStore.ts) unless `env` names a DATABASE_URL.
 */
export const startGateway = async (
  options: {
    readonly env?: Record<string, string>
    readonly dataDir?: string
    readonly host?: string
    readonly timeouts?: Partial<StreamTimeoutsShape>
    /** How this gateway shares state with others (`SharedState.layerCluster`); default: it does not. */
    readonly sharedState?: Layer.Layer<SharedState>
    /** How outbound connections resolve host names (default: the system resolver). */
    readonly dns?: Resolve
  } = {}
) => {
  const dataDir = options.dataDir ?? tempDir()
  const env =
    onPostgres() && options.env?.DATABASE_URL === undefined ? { ...options.env, DATABASE_URL: await databaseFor(dataDir) } : options.env
  const logs: Array<CapturedLog> = []
  const capture = Logger.make(({ annotations, logLevel, message }) => {
    const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
    logs.push({ level: logLevel.label, message: text, annotations: Object.fromEntries(annotations) })
  })
  const config = AppConfig.layer({ dataDir, host: options.host ?? "127.0.0.1", port: 0, logFormat: "json" })
  const layer = ServerLayer.pipe(
    Layer.provide(StreamTimeouts.layerTest(options.timeouts ?? {})),
    Layer.provide(options.sharedState ?? SharedState.layer),
    Layer.provide(options.dns ? Layer.succeed(DnsResolver, options.dns) : Layer.empty),
    Layer.provideMerge(config),
    Layer.provide(Logger.replace(Logger.defaultLogger, capture)),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Debug)),
    // The local health check would probe every fake upstream on loopback every 30 s and show up
    // in its recorded requests: off unless a test sets its interval (test/background-tasks.test.ts).
    // The C heap's trim at rest too: a test gateway left open would trim inside another test's RSS
    // readings (test/malloc-trim.test.ts).
    Layer.provide(
      Layer.setConfigProvider(
        ConfigProvider.fromMap(
          new Map(Object.entries({ GATEWAY_LOCAL_HEALTHCHECK_INTERVAL_SECONDS: "0", GATEWAY_MALLOC_TRIM_SECONDS: "0", ...env }))
        )
      )
    )
  )
  const runtime = ManagedRuntime.make(sequentialLayer(layer))
  const server = await runtime.runPromise(GatewayServer)
  return {
    url: server.url,
    dataDir,
    logs,
    runtime,
    run: <A, E>(effect: Effect.Effect<A, E, ManagedRuntime.ManagedRuntime.Context<typeof runtime>>) => runtime.runPromise(effect),
    /**
     * Every request that began has written its usage row: waits until none is in flight (a
     * request's client can read its answer a moment before the request ends and queues its row),
     * then flushes the usage writer. The one wait for usage rows (no sleeping and hoping).
     */
    usageWritten: () =>
      runtime.runPromise(
        Effect.gen(function* () {
          const inflight = yield* InFlight
          yield* inflight.idle.pipe(
            Effect.timeoutFail({
              duration: "10 seconds",
              onTimeout: () => new Error(`requests still in flight after 10 s: ${inflight.running().join(", ")}`)
            })
          )
          yield* (yield* BatchWriter).flush
        })
      ),
    /** Forgets breakers, cooldowns, lockouts and routing memory, so tests sharing a gateway do not see each other's failures. */
    resetResilience: () =>
      runtime.runPromise(
        Effect.gen(function* () {
          yield* (yield* CircuitBreakers).reset()
          yield* (yield* Cooldowns).reset()
          yield* (yield* Lockouts).clear({ all: true })
          ;(yield* RoutingMemory).clear()
        })
      ),
    close: () => runtime.dispose()
  }
}

/** fetch against the gateway with JSON in and out. */
export const call = async (
  url: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}
): Promise<{ status: number; headers: Headers; body: any; text: string }> => {
  const res = await fetch(url, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: { ...(init.body === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
    body: init.body === undefined ? undefined : typeof init.body === "string" ? init.body : JSON.stringify(init.body)
  })
  const text = await res.text()
  let body: any
  try {
    body = text ? JSON.parse(text) : undefined
  } catch {
    body = undefined
  }
  return { status: res.status, headers: res.headers, body, text }
}

/**
 * A request with the path, headers and body exactly as given (fetch would normalise some paths
 * and set its own content type); no connection reuse.
 */
export const rawCall = (base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
  new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any; text: string }>((resolve, reject) => {
    const url = new URL(base)
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers, agent: false }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => (text += c))
      res.on("end", () => {
        let parsed: any
        try {
          parsed = JSON.parse(text)
        } catch {
          parsed = undefined
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed, text })
      })
    })
    req.on("error", reject)
    req.end(body)
  })

/** `env` plus the DATABASE_URL of the PostgreSQL database a test gateway on `dataDir` used, if any. */
const withDatabaseOf = (dataDir: string, env: Record<string, string>): Record<string, string> => {
  const url = env.DATABASE_URL === undefined ? databaseOf(dataDir) : undefined
  return url === undefined ? env : { ...env, DATABASE_URL: url }
}

/**
 * The gateway's services without the server, on `dataDir`: a second process's view of the same
 * database (what the CLI does). Use with `Effect.provide`.
 */
export const localCore = (dataDir: string, env: Record<string, string> = {}) =>
  CoreLayer.pipe(
    Layer.provide(AppConfig.layerTest({ dataDir })),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(withDatabaseOf(dataDir, env)))))),
    Layer.provide(Logger.replace(Logger.defaultLogger, Logger.none))
  )
