import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import cluster, { type Worker } from "node:cluster"
import * as crypto from "node:crypto"
import * as net from "node:net"
import { availableParallelism } from "node:os"
import * as path from "node:path"
import { CLUSTER_SECRET_ENV } from "../kernel/clusterSecret.js"
import { AppConfig, type AppConfigShape } from "../platform/config/AppConfig.js"
import * as Logging from "../services/observability/Logging.js"
import { makeRelay, toWorker } from "../platform/state/clusterIpc.js"
import { RESTART_EXIT_CODE, restartMode, type StopIntent } from "../platform/system/Lifecycle.js"
import { startingEnv } from "../platform/system/startEnv.js"
import { supervise } from "./supervise.js"

/**
 * `gateway --workers N`: the primary forks the workers, relays shared state and restarts the dead;
 * it loads no gateway service (docs/scale-out.md, "Workers").
 */

/** The most workers `--workers` takes. */
export const MAX_WORKERS = 64

/** `--workers` as given: a whole number from 1 to 64, or `auto` (the number of cores). An Error says what is wrong. */
export const parseWorkers = (text: string, cores: number = availableParallelism()): number | Error => {
  const t = text.trim().toLowerCase()
  if (t === "auto") return Math.max(1, Math.min(MAX_WORKERS, cores))
  if (!/^\d+$/.test(t)) return new Error(`--workers: must be a whole number from 1 to ${MAX_WORKERS} or "auto", got "${text}"`)
  const n = Number(t)
  if (n < 1 || n > MAX_WORKERS) return new Error(`--workers: must be a whole number from 1 to ${MAX_WORKERS} or "auto", got "${text}"`)
  return n
}

/** A worker that dies is started again after 0.25 s, doubling to at most 10 s; a worker that lived 30 s or more starts over at 0.25 s. */
export const restartBackoff = Schedule.exponential("250 millis", 2).pipe(
  Schedule.modifyDelay((_, delay) => Duration.min(delay, Duration.seconds(10))),
  Schedule.delays
)
const HEALTHY_AFTER_MS = 30_000

/** How long workers get to stop gracefully (their own grace is 10 s) before they are killed. */
const STOP_GRACE = Duration.seconds(15)

/** What the primary says at start about what the workers share, and what stays per worker. */
export const sharingReport = (
  n: number,
  config: Pick<AppConfigShape, "dataDir">,
  env: NodeJS.ProcessEnv = process.env
): ReadonlyArray<string> => {
  const store = env.DATABASE_URL ? "the database of DATABASE_URL" : `the SQLite file ${path.join(config.dataDir, "gateway.db")}`
  const stateVia = env.REDIS_URL ? "Redis (REDIS_URL)" : "the primary over IPC (no REDIS_URL)"
  return [
    `workers: ${n} processes share the port; each is a whole gateway`,
    `workers: shared through ${store}: API keys, providers and connections, combos, settings and feature flags, usage rows, budget and limit configuration, files and batches, webhooks and their deliveries, audit log`,
    `workers: shared through ${stateVia}: circuit breakers and their half-open probe, cooldowns, lockouts, budget and token-limit spend, inbound rate-limit counters (${env.REDIS_URL ? "in Redis" : "held by the primary, exact"}), idempotent answers, the response cache's memory tier, sticky sessions, previous_response_id, the failed-login throttle, OAuth sign-ins in progress, the live feed's events, the traffic inspector's buffer and sessions (worker 1 holds its capture listeners)`,
    `workers: per worker: idempotency keys still in flight, routing latency windows and in-flight counts, WebSocket conversations, MCP sessions, cache hit statistics, in-memory caches (refreshed from the store), background tasks (each worker runs its own; the batch sweep only worker 1)`
  ]
}

/**
 * How many of `n` workers serve: one per core this process may use (`os.availableParallelism()`
 * follows the CPU affinity of `taskset` or a cpuset, which the workers inherit). Processes crowded
 * on fewer cores take turns there and serve less than that many processes alone would (each keeps
 * its own code and heap in the core's caches: docs/performance.md, "The pinned `--workers 2` row is
 * the core's sharing"), so the others stand by: whole gateways that do not listen until a serving
 * worker stops, when one takes its place at once (docs/scale-out.md, "Cores").
 */
export const servingWorkers = (n: number, cores: number = availableParallelism(), standby = true): number =>
  standby ? Math.max(1, Math.min(n, cores)) : n

/**
 * `GATEWAY_WORKERS_STANDBY`: `true` (unset) lets workers beyond the cores stand by; `false` makes
 * every worker serve whatever the cores (docs/scale-out.md, "Cores"). An Error says what is wrong.
 */
export const standbyWanted = (env: NodeJS.ProcessEnv = process.env): boolean | Error => {
  const v = env.GATEWAY_WORKERS_STANDBY?.trim().toLowerCase()
  if (v === undefined || v === "" || v === "true") return true
  if (v === "false") return false
  return new Error(`GATEWAY_WORKERS_STANDBY must be true or false, got "${env.GATEWAY_WORKERS_STANDBY}"`)
}

/** How long a standby told to serve has to listen before it is taken for stuck and killed (its exit hands the port on). */
const PROMOTED_LISTEN_MS = 10_000

/** What the primary says at start when some workers stand by (more workers than cores). */
export const crowdedCores = (n: number, cores: number = availableParallelism(), standby = true): string | undefined => {
  if (n <= cores) return undefined
  const head = `workers: ${n} workers may use ${cores === 1 ? "1 core" : `${cores} cores`} only (this process's CPU affinity, which they inherit)`
  if (!standby)
    return `${head}, and every one serves (GATEWAY_WORKERS_STANDBY=false): they take turns there and serve no more than ${cores === 1 ? "one process" : `${cores} processes`} would`
  const standing = n - cores
  return `${head}: ${cores} ${cores === 1 ? "serves" : "serve"} and ${standing} ${standing === 1 ? "stands" : "stand"} by, to take a serving worker's place at once if it stops`
}

/** A port nothing listens on now, from the system (the primary's `--port 0`). */
const freePort = (host: string) =>
  Effect.async<number, Error>((resume) => {
    const server = net.createServer()
    server.once("error", (e) => resume(Effect.fail(new Error(`cannot find a free port on ${host}: ${e.message}`))))
    server.listen(0, host, () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resume(Effect.succeed(port)))
    })
  })

interface Slot {
  readonly id: number
  worker: Worker | undefined
  /** Serving (listens on the port) or standing by (started with GATEWAY_WORKER_ROLE=standby). */
  role: "serve" | "standby"
  /** A standby whose worker said it is ready to serve. */
  ready: boolean
  /** Its worker listens on the gateway's port. */
  listening: boolean
}

/**
 * The primary of `gateway --workers n`. Starts worker 1 and waits for it to listen (so the
 * database's migrations run once, in it), then the others. Never returns while serving; exits
 * the process when done (0 after a stop, 75 or a fresh supervised primary after a restart, 1 when
 * the first worker could not start).
 */
export const servePrimary = (n: number, overrides: Partial<AppConfigShape>) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const runtime = yield* Effect.runtime<never>()
    const logWarning = (message: string) => Runtime.runFork(runtime)(Effect.logWarning(message))
    // Checked by the command line before this runs (src/cli/commands/serve.impl.ts).
    const standby = standbyWanted() !== false
    const serving = servingWorkers(n, availableParallelism(), standby)
    const slots: Array<Slot> = Array.from({ length: n }, (_, i) => ({
      id: i + 1,
      worker: undefined,
      role: i < serving ? ("serve" as const) : ("standby" as const),
      ready: false,
      listening: false
    }))
    const live = () => slots.flatMap((s) => (s.worker !== undefined && !s.worker.isDead() ? [s.worker] : []))
    let stopping: StopIntent | undefined
    // With `--port 0` the primary picks the port once, so that every worker (and each restart,
    // even while no other worker holds it) listens on the same one: node's cluster shares a
    // listening socket between workers that ask for the same address and port.
    // A primary restarted by one (`POST /api/restart`) keeps the port its predecessor picked.
    const inherited = Number(process.env.GATEWAY_WORKER_PORT)
    const port = config.port !== 0 ? config.port : Number.isInteger(inherited) && inherited > 0 ? inherited : yield* freePort(config.host)
    const stopAsked = yield* Deferred.make<StopIntent>()
    const relay = makeRelay({
      workers: live,
      onStop: (intent) => {
        Deferred.unsafeDone(stopAsked, Effect.succeed(intent))
      },
      onStandby: (from) => {
        const slot = slots.find((s) => s.worker === from)
        if (slot === undefined || slot.role !== "standby") return
        slot.ready = true
        // A serving worker is down, waiting out its restart's backoff: this one serves in its place
        // now, and that one comes back as a standby.
        const down = slots.find((s) => s.role === "serve" && s.worker?.isDead() === true)
        if (down !== undefined && stopping === undefined && tellToServe(slot)) {
          down.role = "standby"
          logWarning(`worker ${slot.id}, standing by, serves in the place of worker ${down.id}, which is down`)
        }
      }
    })

    cluster.setupPrimary({ exec: process.argv[1]!, args: process.argv.slice(2), execArgv: process.execArgv })
    // Names this gateway to its workers on channels that may reach other gateways (Redis).
    const clusterId = crypto.randomUUID()
    // One credential for the workers' own-route calls, which the shared port may hand to any of them (src/kernel/InternalCalls.ts).
    const internalSecret = crypto.randomBytes(32).toString("hex")
    for (const line of sharingReport(n, config)) yield* Effect.logInfo(line)
    const crowded = crowdedCores(n, availableParallelism(), standby)
    if (crowded !== undefined) yield* Effect.logWarning(crowded)

    /** Forks the worker of `slot`; completes with how it ended. `listening` completes when it listens. */
    const fork = (slot: Slot, listening?: Deferred.Deferred<string>) =>
      Effect.async<{ code: number | null; signal: string | null; startedAt: number }>((resume) => {
        const startedAt = Date.now()
        slot.ready = false
        slot.listening = false
        const w = cluster.fork({
          GATEWAY_WORKER_ID: String(slot.id),
          GATEWAY_WORKER_ROLE: slot.role,
          GATEWAY_WORKER_PORT: String(port),
          GATEWAY_CLUSTER_ID: clusterId,
          [CLUSTER_SECRET_ENV]: internalSecret,
          // Read by bin/gateway before the env file is: a worker sees what the primary saw (the
          // environment it started with), not the env file's value, which this process's has by now.
          GATEWAY_V8_HELPER_NICE: startingEnv().GATEWAY_V8_HELPER_NICE
        })
        slot.worker = w
        w.on("message", (m: unknown) => relay(w, m))
        // A worker listens on other ports too (the dashboard's live feed): the gateway's port is
        // the one that says it is up.
        w.on("listening", (address) => {
          if (address.port !== port) return
          slot.listening = true
          if (listening)
            Deferred.unsafeDone(
              listening,
              Effect.succeed(
                `http://${address.address && address.address !== "::" ? (address.address.includes(":") ? `[${address.address}]` : address.address) : config.host}:${address.port}`
              )
            )
        })
        w.once("exit", (code, signal) => resume(Effect.succeed({ code, signal, startedAt })))
      })

    /**
     * Tells the ready standby of `slot` to serve: it is a serving worker from then on. One that
     * does not listen within PROMOTED_LISTEN_MS (its loop stuck) is killed, and its exit hands the
     * port on as any serving worker's does. False when it is not a ready standby or cannot be told.
     */
    const tellToServe = (slot: Slot): boolean => {
      const w = slot.worker
      if (slot.role !== "standby" || !slot.ready || w === undefined || w.isDead() || !toWorker(w, { gw: "serve" })) return false
      slot.role = "serve"
      slot.ready = false
      setTimeout(() => {
        if (slot.worker !== w || slot.listening || w.isDead() || stopping !== undefined) return
        logWarning(`worker ${slot.id} was told to serve and did not listen within ${PROMOTED_LISTEN_MS / 1000} s; killing it`)
        w.process.kill("SIGKILL")
      }, PROMOTED_LISTEN_MS).unref()
      return true
    }

    /** The first ready standby, told to serve; undefined when none is ready. */
    const promoteStandby = (): Slot | undefined => slots.find(tellToServe)

    /** Runs `slot`'s worker for as long as the gateway serves: restarted with `restartBackoff` after each death. */
    const keep = (slot: Slot, first: { code: number | null; signal: string | null; startedAt: number } | undefined) =>
      Effect.gen(function* () {
        const backoff = yield* Schedule.driver(restartBackoff)
        let ended = first
        for (;;) {
          if (ended !== undefined) {
            if (stopping !== undefined) return
            const how = ended.signal ?? `code ${ended.code}`
            // A serving worker stopped: a ready standby listens in its place now, and this one comes back as the standby.
            const standby = slot.role === "serve" ? promoteStandby() : undefined
            if (standby !== undefined) {
              slot.role = "standby"
              yield* Effect.logWarning(`worker ${slot.id} exited (${how}); worker ${standby.id}, standing by, serves in its place`)
            }
            if (Date.now() - ended.startedAt >= HEALTHY_AFTER_MS) yield* backoff.reset
            const delay = yield* Effect.orDie(backoff.next(undefined))
            yield* Effect.logWarning(
              `worker ${slot.id} exited (${how}); starting it again${slot.role === "standby" ? " as a standby" : ""} in ${Duration.format(delay)}`
            )
            if (stopping !== undefined) return
          }
          ended = yield* fork(slot)
        }
      })

    // Worker 1 first: it migrates the database; the others start once it listens.
    const firstListening = yield* Deferred.make<string>()
    const firstExit = yield* Effect.fork(fork(slots[0]!, firstListening))
    const started = yield* Effect.raceFirst(
      Effect.map(Deferred.await(firstListening), (url) => ({ _tag: "listening" as const, url })),
      Effect.map(Fiber.join(firstExit), (exit) => ({ _tag: "exited" as const, exit }))
    )
    if (started._tag === "exited") {
      yield* Effect.logError(`worker 1 exited before it listened (${started.exit.signal ?? `code ${started.exit.code}`}); not starting`)
      return yield* Effect.sync(() => process.exit(1))
    }
    const keepers = yield* Effect.forkAll([
      Effect.flatMap(Fiber.join(firstExit), (exit) => keep(slots[0]!, exit)),
      ...slots.slice(1).map((s) => keep(s, undefined))
    ])
    yield* Effect.logInfo(
      serving === n
        ? `workers: ${n} workers listening on ${started.url}`
        : `workers: ${n} workers on ${started.url}, ${serving} serving and ${n - serving} standing by`
    )

    /** Asks every worker to stop (SIGTERM: each closes gracefully), kills what is left after the grace. */
    const stopAll = Effect.gen(function* () {
      const workers = live()
      for (const w of workers) if (!w.isDead()) w.process.kill("SIGTERM")
      const exited = Effect.forEach(
        workers,
        (w) => Effect.async<void>((done) => (w.isDead() ? done(Effect.void) : void w.once("exit", () => done(Effect.void)))),
        {
          discard: true
        }
      )
      const done = yield* Effect.timeout(exited, STOP_GRACE).pipe(Effect.option)
      if (done._tag === "None") {
        yield* Effect.logWarning("workers did not stop within the grace; killing them")
        for (const w of live()) w.process.kill("SIGKILL")
      }
      yield* Fiber.interrupt(keepers)
    })

    // A signal to the primary interrupts this fiber: every worker is stopped gracefully first.
    const intent = yield* Deferred.await(stopAsked).pipe(
      Effect.onInterrupt(() =>
        Effect.suspend(() => {
          stopping = "shutdown"
          return stopAll
        })
      )
    )
    stopping = intent
    yield* Effect.logInfo(
      intent === "restart" ? "workers: restart asked for; stopping every worker" : "workers: shutdown asked for; stopping every worker"
    )
    yield* stopAll
    if (intent === "shutdown") return yield* Effect.sync(() => process.exit(0))
    if (restartMode() === "exit") return yield* Effect.sync(() => process.exit(RESTART_EXIT_CODE))
    const code = yield* supervise({ GATEWAY_WORKER_PORT: String(port) })
    return yield* Effect.sync(() => process.exit(code))
  }).pipe(Effect.annotateLogs("worker", "primary"), Effect.provide(Logging.layerFromConfig), Effect.provide(AppConfig.layer(overrides)))
