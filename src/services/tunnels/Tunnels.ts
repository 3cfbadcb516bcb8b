/**
 * Tunnels: the quick tunnel, token tunnel and mesh funnel, each a supervised helper, wanted-state kept in the store
 * so a restart reopens them (docs/tunnels.md).
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as path from "node:path"
import type { TunnelKind, TunnelStatus } from "../../domain/tunnels.js"
import { GatewayServer } from "../../kernel/internalCall.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { HostPolicy } from "../../platform/http/HostPolicy.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { isClusterWorker, runsOncePerGateway } from "../../platform/state/clusterIpc.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { followLeader, leadWorkers } from "./workers.js"
import {
  DEFAULT_MESH_INSTALL_URL,
  funnelLife,
  type MeshCheck,
  meshCheck,
  meshFunnelOff,
  meshInstall,
  meshLogin,
  meshStartDaemon,
  type MeshSettings
} from "./mesh.js"
import { helperRecord } from "./process.js"
import { quickLife } from "./quick.js"
import { makeBackend } from "./supervisor.js"
import { TokenTunnelConnector } from "./TokenTunnelConnector.js"

export const TUNNELS_NAMESPACE = "tunnels"
/** Where running helpers are recorded (process.ts, HelperRecord). */
const helpersFile = (dataDir: string) => path.join(dataDir, "tunnels", "helpers.json")
const AUTHTOKEN_KEY = "token.authtoken"

/** A status object with the backend's own extra fields (the mesh's `tunnelUrl`, `funnelNotEnabled`, `enableUrl`). */
export type TunnelView = TunnelStatus & Record<string, unknown>

export interface MeshEnableOptions {
  readonly sudoPassword?: string | undefined
  readonly hostname?: string | undefined
  readonly port?: number | undefined
}

export interface TunnelsShape {
  readonly status: (kind: TunnelKind) => Effect.Effect<TunnelView>
  /** Opens (enable) or closes (disable) the quick tunnel; answers the status at once (`starting` while it comes up). */
  readonly quick: (action: "enable" | "disable") => Effect.Effect<TunnelView>
  /** The token tunnel; an authToken given is stored (encrypted) for later starts too. `needs_auth` without any. */
  readonly token: (action: "enable" | "disable", authToken?: string) => Effect.Effect<TunnelView>
  readonly mesh: {
    readonly check: Effect.Effect<MeshCheck>
    readonly install: (
      sudoPassword: string | undefined,
      onLine: (line: string) => void
    ) => Effect.Effect<{ readonly ok: boolean; readonly error?: string }>
    readonly startDaemon: (sudoPassword: string | undefined) => Effect.Effect<{ readonly ok: boolean; readonly error?: string }>
    readonly login: (hostname: string | undefined) => Effect.Effect<{ readonly authUrl: string | null; readonly error?: string }>
    /** Starts the funnel and waits (a few seconds) for its first word: running, not allowed on the network (`funnelNotEnabled`), or an
     * error. */
    readonly enable: (options: MeshEnableOptions) => Effect.Effect<TunnelView>
    readonly disable: (sudoPassword: string | undefined) => Effect.Effect<TunnelView & { readonly error?: string }>
  }
  /** The tunnels open now (running), for the health ping, `doctor` and the dashboard. */
  readonly open: Effect.Effect<ReadonlyArray<{ readonly kind: TunnelKind; readonly publicUrl: string | null }>>
  /** The gateway's own address, once it listens (Tunnels.targetLayer): what tunnels forward to. */
  readonly setTarget: (url: string | undefined) => Effect.Effect<void>
}

/** How long `POST /api/tunnels/mesh/enable` waits for the funnel's first word before answering `starting`. */
const MESH_ENABLE_WAIT_MS = 20_000

/** The tunnels of this process: the backends run here. */
const makeLocal = Effect.gen(function* () {
  const app = yield* AppConfig
  const kv = yield* KeyValue
  const secrets = yield* Secrets
  const hostPolicy = yield* HostPolicy
  const connector = yield* TokenTunnelConnector
  const runtime = yield* Effect.runtime<never>()
  const opt = (name: string) => Effect.orDie(Config.string(name).pipe(Config.option, Config.map(Option.getOrUndefined)))
  const quickSettings = {
    dataDir: app.dataDir,
    bin: yield* opt("QUICK_TUNNEL_BIN"),
    downloadUrl: yield* opt("QUICK_TUNNEL_DOWNLOAD_URL"),
    sha256: yield* opt("QUICK_TUNNEL_SHA256")
  }
  const protocol = (yield* opt("TUNNEL_TRANSPORT_PROTOCOL")) ?? "http2"
  const registerTimeout = Duration.seconds(
    yield* Config.integer("TUNNEL_REGISTER_TIMEOUT_SECONDS").pipe(
      Config.validate({
        message: "TUNNEL_REGISTER_TIMEOUT_SECONDS must be a whole number of seconds, at least 1",
        validation: (n) => n >= 1
      }),
      Config.withDefault(60),
      Effect.orDie
    )
  )
  const envToken = yield* opt("TOKEN_TUNNEL_AUTHTOKEN")
  const meshBin = yield* opt("MESH_TUNNEL_BIN")
  const daemonBin = yield* opt("MESH_TUNNEL_DAEMON_BIN")
  const mesh: MeshSettings = {
    bin: meshBin ?? "tailscale",
    daemonBin: daemonBin ?? (meshBin ? path.join(path.dirname(meshBin), "tailscaled") : "tailscaled"),
    daemonBinSet: daemonBin !== undefined,
    installUrl: (yield* opt("MESH_TUNNEL_INSTALL_URL")) ?? DEFAULT_MESH_INSTALL_URL,
    dataDir: app.dataDir
  }
  let target: string | undefined
  // Once the gateway stops, nothing starts again (an enable that arrives during the shutdown).
  let closed = false
  const listeners = new Set<() => void>()
  const onChange = () => {
    for (const f of listeners) f()
  }

  // The authtoken in use: the last one given (body or dashboard, stored encrypted), else the environment's.
  let authtoken: string | undefined
  const stored = yield* kv.get(TUNNELS_NAMESPACE, AUTHTOKEN_KEY)
  if (Option.isSome(stored)) {
    const plain = yield* Effect.either(secrets.decrypt(stored.value))
    if (plain._tag === "Right") authtoken = Redacted.value(plain.right)
    else yield* Effect.logWarning("token tunnel: the stored authtoken cannot be decrypted with the current storage key; set it again")
  }
  const tokenOf = () => authtoken ?? envToken
  /** The token the vendor last refused (in memory: a restarted gateway tries it once more). */
  let refusedToken: string | undefined
  const maskToken = (text: string) => {
    const t = tokenOf()
    return t && t.length >= 4 ? text.split(t).join("***") : text
  }

  // The mesh funnel's password and name are for the start they came with only: a restart after
  // a crash runs without the password (and says so if the CLI then needs root).
  const record = helperRecord(helpersFile(app.dataDir))
  let meshOnce: MeshEnableOptions = {}
  const backends = {
    quick: makeBackend({
      label: "quick tunnel",
      run: quickLife(quickSettings, protocol),
      runtime,
      hostPolicy,
      onChange,
      registerTimeout,
      record
    }),
    token: makeBackend({
      label: "token tunnel",
      run: (life, to) => {
        const t = tokenOf()
        return t === undefined
          ? Effect.die("no authtoken")
          : connector.run(life, to, t).pipe(
              // Refused by the vendor: not tried again with the same token (a new one clears it).
              Effect.tapError((e) => Effect.sync(() => void (e.phase === "needs_auth" && e.permanent ? (refusedToken = t) : undefined)))
            )
      },
      runtime,
      hostPolicy,
      mask: maskToken,
      onChange,
      registerTimeout,
      record
    }),
    mesh: makeBackend({
      label: "mesh funnel",
      run: funnelLife(mesh, () => {
        const once = meshOnce
        meshOnce = { ...(once.hostname ? { hostname: once.hostname } : {}) }
        return { ...(once.sudoPassword ? { sudoPassword: once.sudoPassword } : {}), ...(once.hostname ? { hostname: once.hostname } : {}) }
      }),
      runtime,
      hostPolicy,
      onChange,
      registerTimeout,
      record
    })
  } as const

  interface MeshWanted {
    readonly port?: number
    readonly hostname?: string
  }
  const wanted = (kind: TunnelKind) => kv.get(TUNNELS_NAMESPACE, kind)
  const meshTarget = (w: MeshWanted) => (w.port !== undefined ? `http://127.0.0.1:${w.port}` : target)
  const readMesh = (v: string): MeshWanted => {
    try {
      const parsed = JSON.parse(v) as MeshWanted
      return typeof parsed === "object" && parsed !== null ? parsed : {}
    } catch {
      return {}
    }
  }
  let meshWanted: MeshWanted = {}

  const view = (kind: TunnelKind): TunnelView => {
    if (kind === "mesh") {
      const s = backends.mesh.status(meshTarget(meshWanted))
      return { ...s, tunnelUrl: s.publicUrl ?? null }
    }
    const s = backends[kind].status(target)
    if (kind === "token" && tokenOf() === undefined && s.phase === "stopped")
      return {
        ...s,
        phase: "needs_auth",
        lastError:
          "no authtoken is known: send authToken (POST /api/tunnels/token), enter it on the dashboard, or set TOKEN_TUNNEL_AUTHTOKEN"
      }
    return s
  }

  const startToken = Effect.gen(function* () {
    if (target === undefined || closed) return
    if (tokenOf() === undefined) {
      yield* backends.token.stop
      return backends.token.set(
        "needs_auth",
        "no authtoken is known: send authToken (POST /api/tunnels/token), enter it on the dashboard, or set TOKEN_TUNNEL_AUTHTOKEN"
      )
    }
    if (tokenOf() === refusedToken && !backends.token.running()) {
      const refused = backends.token.status(target)
      return backends.token.set(
        "needs_auth",
        refused.phase === "needs_auth" && refused.lastError ? refused.lastError : "the authtoken was refused: give a new one"
      )
    }
    yield* backends.token.start(target)
  })

  const startWanted = Effect.gen(function* () {
    if (target === undefined || closed) return
    if (Option.isSome(yield* wanted("quick"))) yield* backends.quick.start(target)
    if (Option.isSome(yield* wanted("token"))) yield* startToken
    const m = yield* wanted("mesh")
    if (Option.isSome(m)) {
      meshWanted = readMesh(m.value)
      meshOnce = meshWanted.hostname ? { hostname: meshWanted.hostname } : {}
      const to = meshTarget(meshWanted)
      if (to) yield* backends.mesh.start(to)
    }
  })
  const stopAll = Effect.all([backends.quick.stop, backends.token.stop, backends.mesh.stop], { concurrency: "unbounded", discard: true })
  // The sign-in waiting for the browser (one at a time: a new one ends the last), stopped with the gateway.
  let login: (() => Promise<void>) | undefined
  const endLogin = () => {
    const d = login
    login = undefined
    return d ? d() : Promise.resolve()
  }

  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      closed = true
    }).pipe(Effect.zipRight(stopAll), Effect.zipRight(Effect.promise(endLogin)))
  )

  const service: TunnelsShape = {
    status: (kind) => Effect.sync(() => view(kind)),
    quick: (action) =>
      Effect.gen(function* () {
        if (action === "enable") {
          yield* kv.set(TUNNELS_NAMESPACE, "quick", "enabled")
          if (backends.quick.status(target).phase === "error") yield* backends.quick.stop
          if (target !== undefined && !closed) yield* backends.quick.start(target)
        } else {
          yield* kv.remove(TUNNELS_NAMESPACE, "quick")
          yield* backends.quick.stop
          backends.quick.set("stopped", null)
        }
        return view("quick")
      }),
    token: (action, authToken) =>
      Effect.gen(function* () {
        if (authToken !== undefined && authToken !== authtoken) {
          authtoken = authToken
          yield* kv.set(TUNNELS_NAMESPACE, AUTHTOKEN_KEY, secrets.encrypt(authToken))
          // A new token replaces the old one in a running tunnel.
          if (backends.token.running()) yield* backends.token.stop
        }
        if (action === "enable") {
          yield* kv.set(TUNNELS_NAMESPACE, "token", "enabled")
          yield* startToken
        } else {
          yield* kv.remove(TUNNELS_NAMESPACE, "token")
          yield* backends.token.stop
          backends.token.set("stopped", null)
        }
        return view("token")
      }),
    mesh: {
      check: Effect.promise(() => meshCheck(mesh)),
      install: (sudoPassword, onLine) => Effect.promise(() => meshInstall(mesh, sudoPassword, onLine)),
      startDaemon: (sudoPassword) => Effect.promise(() => meshStartDaemon(mesh, sudoPassword)),
      login: (hostname) =>
        Effect.promise(async () => {
          const r = await meshLogin(mesh, hostname)
          await endLogin()
          login = r.dispose
          return { authUrl: r.authUrl, ...(r.error ? { error: r.error } : {}) }
        }),
      enable: (options) =>
        Effect.gen(function* () {
          meshWanted = {
            ...(options.port !== undefined ? { port: options.port } : {}),
            ...(options.hostname ? { hostname: options.hostname } : {})
          }
          yield* kv.set(TUNNELS_NAMESPACE, "mesh", JSON.stringify(meshWanted))
          yield* backends.mesh.stop
          const to = meshTarget(meshWanted)
          if (to === undefined || closed) return view("mesh")
          meshOnce = { ...options }
          yield* backends.mesh.start(to)
          yield* backends.mesh.settle(MESH_ENABLE_WAIT_MS)
          return view("mesh")
        }),
      disable: (sudoPassword) =>
        Effect.gen(function* () {
          const to = meshTarget(meshWanted)
          yield* kv.remove(TUNNELS_NAMESPACE, "mesh")
          yield* backends.mesh.stop
          backends.mesh.set("stopped", null)
          // A funnel the daemon still serves to the gateway (set up with --bg outside it) is turned off too.
          const off = to === undefined ? { ok: true } : yield* Effect.promise(() => meshFunnelOff(mesh, to, sudoPassword))
          return { ...view("mesh"), ...(off.ok ? {} : { error: off.error }) }
        })
    },
    open: Effect.sync(() =>
      (["quick", "token", "mesh"] as const).flatMap((kind) => {
        const s = view(kind)
        return s.phase === "running" ? [{ kind, publicUrl: s.publicUrl ?? null }] : []
      })
    ),
    setTarget: (url) =>
      Effect.gen(function* () {
        target = url
        if (url === undefined) return yield* stopAll
        yield* startWanted
      })
  }
  return {
    service,
    views: (): Record<TunnelKind, TunnelView> => ({ quick: view("quick"), token: view("token"), mesh: view("mesh") }),
    onChange: (f: () => void) => void listeners.add(f)
  }
})

export class Tunnels extends Context.Tag("gateway/Tunnels")<Tunnels, TunnelsShape>() {
  /**
   * One process runs the backends: under `gateway --workers N` worker 1 does, and the other
   * workers follow it over the shared-state channel (workers.ts), so one tunnel is opened per
   * gateway, not per worker.
   */
  static readonly layer = Layer.scoped(
    Tunnels,
    Effect.gen(function* () {
      const shared = yield* SharedState.orLocal
      if (isClusterWorker() && !runsOncePerGateway()) return yield* followLeader(shared, yield* makeLocal)
      // Helpers a previous run left behind (it crashed or was killed): stopped before anything starts.
      const { dataDir } = yield* AppConfig
      const reaped = yield* Effect.promise(() => helperRecord(helpersFile(dataDir)).reap())
      if (reaped > 0)
        yield* Effect.logWarning(
          `tunnels: stopped ${reaped} helper process${reaped === 1 ? "" : "es"} left running by a previous run of the gateway`
        )
      const local = yield* makeLocal
      if (isClusterWorker()) yield* leadWorkers(shared, local)
      return local.service
    })
  )

  /** Gives the tunnels the gateway's address once it listens (and opens the tunnels the store says are wanted). */
  static readonly targetLayer = Layer.scopedDiscard(
    Effect.gen(function* () {
      const tunnels = yield* Tunnels
      const server = yield* GatewayServer
      yield* tunnels.setTarget(server.url)
      yield* Effect.addFinalizer(() => tunnels.setTarget(undefined))
    })
  )
}
