/**
 * Periodic connection health checks: `local` probes local runners and cools down those that do not answer; `token`
 * probes credentials and marks refused ones terminal (docs/operations.md#background-tasks).
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { backgroundJob } from "../../platform/flags/background.js"
import { classify } from "./classify.js"
import { Cooldowns } from "./Cooldowns.js"
import { type Classification, type ConnectionRef, originOf } from "./types.js"
import { type Connection, Connections } from "../../upstream/providers/Connections.js"
import { OAuth } from "../oauth/OAuth.js"
import { ProviderChecks } from "../../upstream/providers/ProviderChecks.js"
import { classifyHost } from "../../upstream/providers/urlPolicy.js"
import { periodic } from "../../platform/system/periodic.js"

const HealthConfig = Config.all({
  localSeconds: Config.number("GATEWAY_LOCAL_HEALTHCHECK_INTERVAL_SECONDS").pipe(Config.withDefault(30)),
  localTimeoutMs: Config.number("GATEWAY_LOCAL_HEALTHCHECK_TIMEOUT_MS").pipe(Config.withDefault(3000)),
  tokenSeconds: Config.number("GATEWAY_TOKEN_HEALTHCHECK_INTERVAL_SECONDS").pipe(Config.withDefault(1800))
})

/** The error type the local check writes on a connection it put into a cooldown. */
export const LOCAL_HEALTH_ERROR = "local_healthcheck"

/** Whether a connection talks to a local runner: a local provider, or a loopback / LAN base URL. */
export const isLocalConnection = (c: Connection): boolean => {
  if (c.provider.authClass === "local") return true
  const origin = originOf(c.effectiveBaseUrl)
  if (!origin) return false
  const kind = classifyHost(new URL(origin).hostname)
  return kind === "loopback" || kind === "lan"
}

const refOf = (c: Connection): ConnectionRef => ({
  id: c.id,
  name: c.name,
  provider: { id: c.provider.id, authClass: c.provider.authClass, origin: originOf(c.effectiveBaseUrl) }
})

export const HealthChecks = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* HealthConfig.pipe(Effect.orDie)
    if (config.localSeconds <= 0 && config.tokenSeconds <= 0) return
    if (!(yield* backgroundJob("connection health checks"))) return
    const flags = yield* FeatureFlags
    const connections = yield* Connections
    const checks = yield* ProviderChecks
    const cooldowns = yield* Cooldowns
    const oauth = yield* OAuth
    const localTimeout = Duration.millis(config.localTimeoutMs)

    const localRound = Effect.gen(function* () {
      if (yield* flags.enabled("GATEWAY_DISABLE_LOCAL_HEALTHCHECK")) return
      const local = (yield* connections.list).filter((c) => c.enabled && isLocalConnection(c))
      yield* Effect.forEach(
        local,
        (c) =>
          Effect.gen(function* () {
            const result = yield* checks.probe(c, localTimeout)
            const now = yield* Clock.currentTimeMillis
            const dead = result.status === null || result.status >= 500
            const state = cooldowns.availability(c.id, now).state
            if (dead) {
              const status = result.status ?? 502
              const waitMs = Math.round(config.localSeconds * 1000 * 1.25) + config.localTimeoutMs
              const verdict: Classification = {
                scope: "provider",
                retryable: true,
                tripsBreaker: false,
                cooldown: true,
                quotaExhausted: false,
                retryAfterMs: waitMs,
                reason: LOCAL_HEALTH_ERROR
              }
              yield* cooldowns.onFailure(refOf(c), verdict, {
                status,
                kind: result.status === null ? "unreachable" : "http",
                message: `local health check: ${result.error ?? `HTTP ${status}`}`
              })
              if (state === "available")
                yield* Effect.logWarning(
                  `local health check: ${c.name} is down (${result.error ?? status}); routing skips it until a probe answers`
                )
            } else if (state === "cooldown") {
              yield* cooldowns.onSuccess(c.id)
              yield* Effect.logInfo(`local health check: ${c.name} answers again`)
            }
          }),
        { concurrency: 4, discard: true }
      )
    })

    const tokenRound = Effect.gen(function* () {
      if (yield* flags.enabled("GATEWAY_DISABLE_TOKEN_HEALTHCHECK")) return
      const now = yield* Clock.currentTimeMillis
      const withCredentials = (yield* connections.list).filter(
        (c) =>
          c.enabled &&
          c.keyError === null &&
          (c.apiKey !== null || c.oauth !== undefined) &&
          cooldowns.availability(c.id, now).state !== "expired" &&
          cooldowns.availability(c.id, now).state !== "banned"
      )
      yield* Effect.forEach(
        withCredentials,
        (c) =>
          Effect.gen(function* () {
            // An OAuth grant is refreshed first when it is due; a refusal of the refresh token is the same verdict as a 401.
            const fresh = c.oauth === undefined ? Either.right(c) : yield* Effect.either(oauth.fresh(c))
            if (Either.isLeft(fresh)) {
              if (fresh.left.permanent) yield* expire(c, 401, `token health check: ${fresh.left.message}`, "")
              return
            }
            const conn = fresh.right
            const result = yield* checks.probe(conn)
            if (result.status === 401 || result.status === 403) {
              yield* expire(conn, result.status, `token health check: ${result.error ?? `HTTP ${result.status}`}`, result.error ?? "")
            }
          }),
        { concurrency: 4, discard: true }
      )
    })

    const expire = (c: Connection, status: number, message: string, body: string) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const info = { status, kind: "http" as const, message, body }
        const verdict = classify(info, now)
        const terminal = verdict.terminal ?? "expired"
        yield* cooldowns.onFailure(
          refOf(c),
          { ...verdict, scope: "connection", cooldown: false, terminal, reason: verdict.terminal ? verdict.reason : "auth" },
          info
        )
        yield* Effect.logWarning(`token health check: ${c.name} was refused (HTTP ${status}); marked ${terminal}`)
      })

    if (config.localSeconds > 0) yield* periodic("local health check", config.localSeconds, localRound)
    if (config.tokenSeconds > 0) yield* periodic("token health check", config.tokenSeconds, tokenRound)
  })
)
