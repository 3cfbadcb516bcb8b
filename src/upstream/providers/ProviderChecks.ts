import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type { ConnectionModels, ConnectionTestResult, ProbeResult, ValidateProvider } from "../../domain/connections.js"
import { BadRequest, type NotFound } from "../../domain/errors.js"
import { Egress } from "../egress/Egress.js"
import { UpstreamHttp } from "../client/UpstreamHttp.js"
import { findProvider, PROVIDERS } from "../../domain/catalog/catalog.js"
import { type Connection, Connections, connectionModelIds } from "./Connections.js"
import { oauthHeaders } from "../client/executors.js"
import { type ProbedModel, probeProvider } from "./probe.js"
import { checkProviderUrl } from "./urlPolicy.js"

export interface ProviderChecksShape {
  /** Probes a stored connection and records the outcome on it. */
  readonly test: (idOrName: string) => Effect.Effect<ConnectionTestResult, NotFound>
  /** Probes credentials without storing anything. */
  readonly validate: (input: ValidateProvider) => Effect.Effect<ProbeResult, BadRequest>
  /** The upstream's own model list, or the catalog's when the upstream cannot be asked. */
  readonly models: (idOrName: string) => Effect.Effect<ConnectionModels, NotFound>
  /**
   * Probes a connection as given (the model list, authenticated as its requests are: an OAuth
   * grant's bearer token and headers included) and records nothing: the health checks.
   */
  readonly probe: (
    c: Connection,
    timeout?: Duration.Duration
  ) => Effect.Effect<ProbeResult & { readonly models: ReadonlyArray<ProbedModel> }>
}

const unreachable = (error: string) => ({ ok: false, status: null, latencyMs: 0, modelCount: null, error, models: [] })

export class ProviderChecks extends Context.Tag("gateway/ProviderChecks")<ProviderChecks, ProviderChecksShape>() {
  static readonly layer = Layer.effect(
    ProviderChecks,
    Effect.gen(function* () {
      const connections = yield* Connections
      const http = yield* UpstreamHttp
      const egress = yield* Egress
      /** Control-plane egress: the connection's proxy, which may fall back to direct (GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK). */
      const via = egress.control

      const probeConnection = (c: Connection, timeout?: Duration.Duration) =>
        Effect.gen(function* () {
          if (c.keyError) return unreachable(c.keyError)
          if (!c.effectiveBaseUrl) return unreachable("connection has no base URL")
          const verdict = checkProviderUrl(c.effectiveBaseUrl, yield* connections.urlPolicy)
          if (!verdict.ok) return unreachable(`baseUrl rejected: ${verdict.reason}`)
          const dispatcher = yield* Effect.either(via(c.proxyId, c.effectiveBaseUrl, c.tlsProfile))
          if (dispatcher._tag === "Left") return unreachable(`${dispatcher.left.code}: ${dispatcher.left.message}`)
          return yield* probeProvider(http, c.provider, c.format, c.effectiveBaseUrl, c.apiKey ? Redacted.value(c.apiKey) : undefined, {
            ...(c.provider.oauth ? { authHeaders: oauthHeaders(c, c.format, undefined) } : {}),
            ...(timeout ? { timeout } : {}),
            ...(dispatcher.right ? { dispatcher: dispatcher.right } : {})
          })
        })

      return {
        probe: probeConnection,
        test: (idOrName) =>
          Effect.gen(function* () {
            const c = yield* connections.get(idOrName)
            const { models: _models, ...result } = yield* probeConnection(c)
            yield* connections.recordTest(c.id, result)
            yield* Effect.logInfo(`provider test ${c.name}: ${result.ok ? "ok" : "failed"}${result.error ? ` (${result.error})` : ""}`)
            return { id: c.id, name: c.name, provider: c.provider.id, ...result }
          }),
        validate: (input) =>
          Effect.gen(function* () {
            const provider = findProvider(input.provider) ?? (yield* connections.provider(input.provider))
            if (!provider) {
              return yield* new BadRequest({
                message: `unknown provider '${input.provider}'; known providers: ${PROVIDERS.map((p) => p.id).join(", ")}`
              })
            }
            const baseUrl = input.baseUrl ?? provider.baseUrl
            if (!baseUrl) return yield* new BadRequest({ message: `baseUrl is required for provider ${provider.id}` })
            const verdict = checkProviderUrl(baseUrl, yield* connections.urlPolicy)
            if (!verdict.ok) return yield* new BadRequest({ message: `baseUrl rejected: ${verdict.reason}` })
            const dispatcher = yield* Effect.either(via(null, baseUrl))
            if (dispatcher._tag === "Left") {
              const { models: _none, ...refused } = unreachable(`${dispatcher.left.code}: ${dispatcher.left.message}`)
              return refused
            }
            const { models: _models, ...result } = yield* probeProvider(
              http,
              provider,
              provider.format,
              baseUrl,
              input.apiKey ?? undefined,
              dispatcher.right ? { dispatcher: dispatcher.right } : {}
            )
            return result
          }),
        models: (idOrName) =>
          Effect.gen(function* () {
            const c = yield* connections.get(idOrName)
            const probed = yield* probeConnection(c)
            const catalog = new Map(c.provider.models.map((m) => [m.id, m]))
            const ids = probed.ok ? probed.models.map((m) => m.id) : connectionModelIds(c)
            const names = new Map(probed.models.map((m) => [m.id, m.name]))
            return {
              connection: c.name,
              provider: c.provider.id,
              source: probed.ok ? ("upstream" as const) : ("catalog" as const),
              error: probed.error,
              models: ids.map((id) => ({
                id,
                name: catalog.get(id)?.name ?? names.get(id) ?? null,
                contextWindow: catalog.get(id)?.contextWindow ?? null,
                maxOutput: catalog.get(id)?.maxOutput ?? null
              }))
            }
          })
      }
    })
  )
}
