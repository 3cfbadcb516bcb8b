import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as RuntimeFlagsPatch from "effect/RuntimeFlagsPatch"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import { InferenceRoutes } from "../inference/InferenceRoutes.js"
import { RealtimeWebSocket } from "./RealtimeWebSocket.js"
import { ResponsesWebSocket } from "./ResponsesWebSocket.js"
import { GatewayServer } from "../kernel/internalCall.js"
import { VERSION } from "../kernel/version.js"
import { ManagementHandler } from "../management/api/ManagementHandler.js"
import { InspectorFeed } from "../management/dashboard/InspectorFeed.js"
import { LiveFeed } from "../management/dashboard/LiveFeed.js"
import { Dashboard } from "../management/dashboard/Dashboard.js"
import { McpHttp } from "../management/mcp/McpHttp.js"
import { McpGateway } from "../inference/mcp/McpGateway.js"
import { type AppConfigShape, AppConfig, isLoopbackHost } from "../platform/config/AppConfig.js"
import { type FeatureFlagsShape, FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { answerRefused } from "../platform/http/lingering.js"
import { awaitServeOrder, startsAsStandby } from "../platform/state/clusterIpc.js"
import { ServerActivity } from "../platform/system/IdleMemory.js"
import { releaseOptimizerOnFirstAnswer } from "../platform/system/optimizerHold.js"
import { Settings } from "../platform/settings/Settings.js"
import { type AdminAuthShape, AdminAuth } from "../services/auth/AdminAuth.js"
import { type ApiKeysShape, ApiKeys } from "../services/auth/ApiKeys.js"
import { makeIpScreen, TRUST_PROXY_FLAG } from "./ipScreen.js"
import { makePlanes, makeRequestListener, makeUpgradeListener, newTraffic, type Run, TURN_BUDGET_MS } from "./requestHandler.js"
import { shutdownServer, trackConnections } from "./shutdown.js"

export { FRESH_GRACE, SHUTDOWN_GRACE } from "./shutdown.js"

export class ServerStartError extends Error {}

/** Listens on `host:port`; a port in use (or any other refusal) is a ServerStartError that says what to do. */
const listen = (server: http.Server, port: number, host: string) =>
  Effect.async<AddressInfo, ServerStartError>((resume) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off("listening", onListening)
      resume(
        Effect.fail(
          new ServerStartError(
            err.code === "EADDRINUSE"
              ? `port ${port} on ${host} is already in use (another gateway running? choose one with --port or PORT)`
              : `cannot listen on ${host}:${port}: ${err.message}`
          )
        )
      )
    }
    const onListening = () => {
      server.off("error", onError)
      resume(Effect.succeed(server.address() as AddressInfo))
    }
    server.once("error", onError)
    server.once("listening", onListening)
    server.listen(port, host)
  })

/** A PEM file of the TLS configuration; one that cannot be read is a ServerStartError naming it. */
const readPem = (file: string) =>
  Effect.try({
    try: () => fs.readFileSync(file),
    catch: (e) => new ServerStartError(`cannot read the TLS file ${file}: ${e instanceof Error ? e.message : String(e)}`)
  })

/** The start's log lines: where the gateway listens, and what is unsafe or not usable yet (a remote address without required keys, no admin
 * credentials). */
const announce = (deps: {
  readonly config: AppConfigShape
  readonly flags: FeatureFlagsShape
  readonly keys: ApiKeysShape
  readonly admin: AdminAuthShape
  readonly url: string
}) =>
  Effect.gen(function* () {
    const { config, flags, keys, admin, url } = deps
    yield* Effect.logInfo(`gateway ${VERSION} listening on ${url} (data in ${config.dataDir})`)
    if (!isLoopbackHost(config.host) && !(yield* flags.enabled("REQUIRE_API_KEY"))) {
      yield* Effect.logWarning(
        config.allowUnauthenticatedRemote
          ? `SECURITY: listening on ${config.host}, reachable from other machines, while REQUIRE_API_KEY is off and GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true: anyone who can reach this port can use your providers. Set REQUIRE_API_KEY=true (or PUT /api/settings/feature-flags) and create keys with \`gateway keys add\`.`
          : `listening on ${config.host}, reachable from other machines, while REQUIRE_API_KEY is off: inference requires a gateway API key on this address anyway (create one with \`gateway keys add\`); GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true would serve without keys.`
      )
    }
    if (!(yield* admin.hasPassword) && !(yield* keys.hasAdminKey)) {
      yield* Effect.logWarning(
        "no admin password or admin API key is set, so the management API cannot be used yet: run `gateway setup` (or start with INITIAL_PASSWORD)"
      )
    }
  })

/**
 * One node:http server for both planes (./requestHandler.ts), closed gracefully before the layers below
 * (docs/ARCHITECTURE.md, "The life of one chat request"). `Server.layer`: the kernel's tag cannot hold it.
 */
export const layer = Layer.scopedContext(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const inference = yield* InferenceRoutes
    const management = yield* ManagementHandler
    const websocket = yield* ResponsesWebSocket
    const realtime = yield* RealtimeWebSocket
    const mcp = yield* McpHttp
    const mcpGateway = yield* McpGateway
    const dashboard = yield* Dashboard
    const live = yield* LiveFeed
    const inspectorFeed = yield* InspectorFeed
    const flags = yield* FeatureFlags
    const settings = yield* Settings
    const keys = yield* ApiKeys
    const admin = yield* AdminAuth
    const fibers = yield* FiberSet.make<void, never>()
    // Request fibers run without Effect's built-in fiber metrics (a counter and a histogram
    // updated per fiber, which nothing reads): one fiber per request.
    const run: Run = yield* FiberSet.runtime(fibers)<never>().pipe(
      Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.disable(RuntimeFlags.RuntimeMetrics))
    )
    const trustProxy = yield* flags.enabled(TRUST_PROXY_FLAG)

    const traffic = newTraffic()
    const { serve, failed } = makePlanes({ traffic, run, inference, management, mcp, mcpGateway, dashboard })
    const screen = makeIpScreen({ flags, settings, run, trustProxy, serve, failed, answered: (res) => traffic.open.delete(res) })
    // requestTimeout (node's default, 5 min) bounds receiving a request, not streaming the answer.
    // A turn's time for starting new requests: past it, they wait for the next turn (docs/operations.md).
    const turnBudgetMs = yield* Config.number("GATEWAY_TURN_BUDGET_MS").pipe(
      Config.validate({ message: "GATEWAY_TURN_BUDGET_MS must be 0 or more milliseconds", validation: (n) => n >= 0 }),
      Config.withDefault(TURN_BUDGET_MS),
      Effect.orDie
    )
    const listener = makeRequestListener({ traffic, screen, failed, turnBudgetMs })
    // HTTPS when a certificate and key are configured (docs/realtime.md, "HTTPS").
    const tls = config.tlsCert !== undefined && config.tlsKey !== undefined
    const server: http.Server = tls
      ? https.createServer(
          { keepAliveTimeout: 65_000, cert: yield* readPem(config.tlsCert!), key: yield* readPem(config.tlsKey!) },
          listener
        )
      : http.createServer({ keepAliveTimeout: 65_000 }, listener)
    // A request the HTTP parser refuses (or that did not arrive in time) is answered, and what the
    // client still sends is read and dropped before the socket closes, instead of node's bare
    // status and a destroy that resets a client still sending its body.
    server.on("clientError", answerRefused)
    trackConnections(server, traffic)
    server.on("upgrade", makeUpgradeListener({ traffic, run, screen, live, inspectorFeed, websocket, realtime }))
    // The start is over at the first answer: the optimizing compiler, held off for it, comes back.
    releaseOptimizerOnFirstAnswer(server)

    const urlOf = (address: AddressInfo) =>
      `${tls ? "https" : "http"}://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}`
    // A standby worker (more workers than cores: docs/scale-out.md, "Cores") is built whole but
    // listens only when its primary says so; its address is the one the primary gave every worker.
    const standby = startsAsStandby()
    const address: AddressInfo = standby
      ? { address: config.host, family: config.host.includes(":") ? "IPv6" : "IPv4", port: config.port }
      : yield* listen(server, config.port, config.host)
    yield* Effect.addFinalizer(shutdownServer({ server, traffic, fibers, turns: listener.turns }))

    const url = urlOf(address)
    if (standby) {
      const runtime = yield* Effect.runtime<never>()
      // Set as the server starts to close: a listen asked for just before is let go of at once.
      let closing = false
      const serveNow = Effect.suspend(() =>
        closing
          ? Effect.void
          : Effect.flatMap(listen(server, config.port, config.host), (at) =>
              closing ? Effect.sync(() => server.close()) : announce({ config, flags, keys, admin, url: urlOf(at) })
            )
      ).pipe(
        // The port it was given cannot be had: the primary starts this worker again.
        Effect.catchAll((e) =>
          Effect.zipRight(
            Effect.logError(e.message),
            Effect.sync(() => process.exit(1))
          )
        )
      )
      const cancel = awaitServeOrder(() => Runtime.runFork(runtime)(serveNow))
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          closing = true
          cancel()
        })
      )
      yield* Effect.logInfo(`gateway ${VERSION} standing by for ${url}: it takes connections when a serving worker stops`)
    } else yield* announce({ config, flags, keys, admin, url })
    // What the server is answering, for the start-up collection to wait on (IdleMemory; it waits a minute at most).
    const inFlight = () => traffic.open.size + traffic.sessions
    const received = () => traffic.received
    return Context.make(GatewayServer, { host: address.address, port: address.port, url }).pipe(
      Context.add(ServerActivity, { inFlight, received })
    )
  })
)
