/**
 * Tunnels (spec document 2, "Tunnel API"; docs/tunnels.md): the quick tunnel, a supervised
 * helper process with an honest phase: `starting` from the spawn, its public address shown once
 * the helper prints it, `running` only once the helper says a connection is registered (a
 * request through the address then reaches the gateway). A helper that dies while wanted is
 * started again on a backoff Schedule (the quick address changes each time); the process group is
 * killed when the tunnel is disabled or the gateway stops. Whether it is wanted is kept in the
 * store (`tunnels` kv namespace), so a restarted gateway opens it again.
 *
 * The token-based tunnel and the mesh funnel are not built yet (their routes answer 501).
 */
import * as Cause from "effect/Cause"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import { type ChildProcess, spawn } from "node:child_process"
import type { TunnelStatus } from "../../domain/tunnels.js"
import { GatewayServer } from "../../kernel/internalCall.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { HelperError, QUICK_URL, quickHelper, REGISTERED } from "./quickHelper.js"

export const TUNNELS_NAMESPACE = "tunnels"

export interface TunnelsShape {
  readonly quickStatus: Effect.Effect<TunnelStatus>
  /** Opens (enable) or closes (disable) the quick tunnel; answers the status at once (`starting` while it comes up). */
  readonly quick: (action: "enable" | "disable") => Effect.Effect<TunnelStatus>
  /** The gateway's own address, once it listens (TunnelsTargetLive): what tunnels forward to. */
  readonly setTarget: (url: string | undefined) => Effect.Effect<void>
}

interface QuickState {
  phase: TunnelStatus["phase"]
  publicUrl: string | null
  lastError: string | null
  proc: ChildProcess | undefined
  fiber: Fiber.RuntimeFiber<void, never> | undefined
}

/** Kills a helper's whole process group (it may have children), then waits for it to go. */
const killGroup = (proc: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null || proc.pid === undefined) return resolve()
    const pid = proc.pid
    const timer = setTimeout(() => {
      try {
        process.kill(-pid, "SIGKILL")
      } catch {
        // gone already
      }
    }, 2000)
    proc.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
    try {
      process.kill(-pid, "SIGTERM")
    } catch {
      clearTimeout(timer)
      resolve()
    }
  })

export class Tunnels extends Context.Tag("gateway/Tunnels")<Tunnels, TunnelsShape>() {
  static readonly layer = Layer.scoped(
    Tunnels,
    Effect.gen(function* () {
      const app = yield* AppConfig
      const kv = yield* KeyValue
      const runtime = yield* Effect.runtime<never>()
      const opt = (name: string) => Config.string(name).pipe(Config.option, Config.map(Option.getOrUndefined))
      const settings = {
        dataDir: app.dataDir,
        bin: yield* Effect.orDie(opt("QUICK_TUNNEL_BIN")),
        downloadUrl: yield* Effect.orDie(opt("QUICK_TUNNEL_DOWNLOAD_URL")),
        sha256: yield* Effect.orDie(opt("QUICK_TUNNEL_SHA256"))
      }
      const protocol = (yield* Effect.orDie(opt("TUNNEL_TRANSPORT_PROTOCOL"))) ?? "http2"
      const quick: QuickState = { phase: "stopped", publicUrl: null, lastError: null, proc: undefined, fiber: undefined }
      let target: string | undefined

      const status = (): TunnelStatus => ({
        phase: quick.phase,
        running: quick.phase === "running",
        publicUrl: quick.publicUrl,
        apiUrl: quick.publicUrl ? `${quick.publicUrl.replace(/\/$/, "")}/v1` : null,
        targetUrl: target ?? null,
        lastError: quick.lastError
      })

      /** One life of the helper: spawned, its output read for the address and the registration; fails when it ends. */
      const runOnce = (url: string) =>
        Effect.acquireUseRelease(
          Effect.tryPromise({
            try: async () => {
              const bin = await quickHelper(settings)
              quick.phase = "starting"
              quick.publicUrl = null
              const proc = spawn(bin, ["tunnel", "--no-autoupdate", "--protocol", protocol, "--url", url], {
                // Its own process group: the whole group is killed on stop, no orphan left.
                detached: true,
                stdio: ["ignore", "pipe", "pipe"]
              })
              quick.proc = proc
              return proc
            },
            catch: (e) => (e instanceof HelperError ? e : new HelperError(`the quick-tunnel helper could not start: ${(e as Error).message}`, false))
          }),
          (proc) =>
            Effect.async<never, HelperError>((resume) => {
              let tail = ""
              const onLine = (chunk: Buffer) => {
                const text = chunk.toString("utf8")
                tail = (tail + text).slice(-2000)
                const found = QUICK_URL.exec(text)
                if (found && quick.publicUrl === null) quick.publicUrl = found[0]
                if (REGISTERED.test(text) && quick.publicUrl !== null) {
                  quick.phase = "running"
                  quick.lastError = null
                }
              }
              proc.stdout?.on("data", onLine)
              proc.stderr?.on("data", onLine)
              proc.once("error", (e) => resume(Effect.fail(new HelperError(`the quick-tunnel helper could not run: ${e.message}`, true))))
              proc.once("exit", (code, signal) => {
                const last = tail.trim().split("\n").slice(-2).join(" ").slice(0, 300)
                resume(Effect.fail(new HelperError(`the quick-tunnel helper exited (${code ?? signal})${last ? `: ${last}` : ""}`, false)))
              })
            }),
          (proc) =>
            Effect.promise(() => killGroup(proc)).pipe(
              Effect.andThen(
                Effect.sync(() => {
                  if (quick.proc === proc) quick.proc = undefined
                })
              )
            )
        )

      const restarts = Schedule.exponential(Duration.seconds(1), 2).pipe(Schedule.union(Schedule.spaced(Duration.seconds(30))))

      const supervise = (url: string) =>
        runOnce(url).pipe(
          Effect.tapError((e) =>
            Effect.sync(() => {
              quick.lastError = e.message
              quick.publicUrl = null
              quick.phase = e.permanent ? "error" : "starting"
            }).pipe(Effect.zipRight(e.permanent ? Effect.logError(`quick tunnel: ${e.message}`) : Effect.logWarning(`quick tunnel: ${e.message}; starting it again`)))
          ),
          Effect.retry({ schedule: restarts, while: (e) => !e.permanent }),
          Effect.catchAllCause((cause) => (Cause.isInterruptedOnly(cause) ? Effect.void : Effect.sync(() => (quick.phase = "error")))),
          Effect.asVoid
        )

      const start = Effect.sync(() => {
        if (quick.fiber !== undefined || target === undefined) return
        quick.phase = "starting"
        quick.lastError = null
        quick.fiber = Runtime.runFork(runtime)(supervise(target))
      })
      const stop = Effect.gen(function* () {
        const fiber = quick.fiber
        quick.fiber = undefined
        if (fiber !== undefined) yield* Fiber.interrupt(fiber)
        const proc = quick.proc
        if (proc !== undefined) yield* Effect.promise(() => killGroup(proc))
        quick.phase = "stopped"
        quick.publicUrl = null
      })
      const wanted = Effect.map(kv.get(TUNNELS_NAMESPACE, "quick"), (v) => Option.isSome(v) && v.value === "enabled")

      yield* Effect.addFinalizer(() => stop)
      return {
        quickStatus: Effect.sync(status),
        quick: (action) =>
          Effect.gen(function* () {
            if (action === "enable") {
              yield* kv.set(TUNNELS_NAMESPACE, "quick", "enabled")
              if (quick.phase === "error") yield* stop
              yield* start
            } else {
              yield* kv.remove(TUNNELS_NAMESPACE, "quick")
              yield* stop
              quick.lastError = null
            }
            return status()
          }),
        setTarget: (url) =>
          Effect.gen(function* () {
            target = url
            if (url === undefined) return yield* stop
            if (yield* wanted) yield* start
          })
      } satisfies TunnelsShape
    })
  )
}

/** Gives the tunnels the gateway's address once it listens (and opens a tunnel the store says is wanted). */
export const TunnelsTargetLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const tunnels = yield* Tunnels
    const server = yield* GatewayServer
    yield* tunnels.setTarget(server.url)
    yield* Effect.addFinalizer(() => tunnels.setTarget(undefined))
  })
)
