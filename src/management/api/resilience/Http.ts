import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { type Connection, Connections } from "../../../upstream/providers/Connections.js"
import { CircuitBreakers } from "../../../services/resilience/CircuitBreakers.js"
import { Cooldowns } from "../../../services/resilience/Cooldowns.js"
import { Lockouts } from "../../../services/resilience/Lockouts.js"
import { QuotaQueue } from "../../../services/resilience/QuotaQueue.js"
import { ResilienceConfig } from "../../../services/resilience/ResilienceConfig.js"
import { type LockoutView, originOf } from "../../../services/resilience/types.js"
import { AutoEngine } from "../../../services/routing/AutoEngine.js"
import { RoutingMemory } from "../../../services/routing/RoutingMemory.js"
import { toIso } from "../../../platform/store/Db.js"
import { BadRequest } from "../../../domain/errors.js"
import { InboundLimits } from "../../../services/accounting/InboundLimits.js"
import { ManagementApi } from "../Api.js"

const lockoutView = (l: LockoutView) => ({ ...l, expiresAt: new Date(l.expiresAt).toISOString() })

/** `/api/resilience*`, `/api/rate-limits`, `/api/rate-limit`. */
export const layer = HttpApiBuilder.group(ManagementApi, "resilience", (handlers) =>
  Effect.gen(function* () {
    const config = yield* ResilienceConfig
    const breakers = yield* CircuitBreakers
    const cooldowns = yield* Cooldowns
    const lockouts = yield* Lockouts
    const connections = yield* Connections
    const memory = yield* RoutingMemory
    const engine = yield* AutoEngine
    const inbound = yield* InboundLimits
    const queue = yield* QuotaQueue

    const connectionStates = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      return (yield* connections.list).map((c) => {
        const h = cooldowns.healthAt(c.id, now)
        const a = cooldowns.availability(c.id, now)
        return {
          id: c.id,
          name: c.name,
          provider: c.provider.id,
          state: a.state,
          rateLimitedUntil: toIso(h.rateLimitedUntil),
          testStatus: h.testStatus,
          lastError: h.lastError,
          lastErrorType: h.lastErrorType,
          errorCode: h.errorCode,
          backoffLevel: h.backoffLevel,
          inFlight: memory.inFlight(c.id),
          max_concurrent: c.maxConcurrent
        }
      })
    })

    return handlers
      .handle("status", () =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const list = yield* breakers.list
          return {
            settings: config.current(),
            breakers: list.map((b) => ({ ...b, retryAt: toIso(b.retryAt), lastFailureAt: toIso(b.lastFailureAt) })),
            connections: yield* connectionStates,
            modelCooldowns: (yield* lockouts.list).map(lockoutView),
            autoExclusions: engine.healing
              .snapshot(now)
              .map((x) => ({ key: x.key, until: new Date(x.until).toISOString(), level: x.level })),
            queue: queue.view(now)
          }
        })
      )
      .handle("update", ({ payload }) => Effect.map(config.update(payload), (settings) => ({ settings })))
      .handle("reset", ({ payload }) =>
        Effect.gen(function* () {
          if (payload.origin !== undefined && payload.provider === undefined)
            return yield* new BadRequest({ message: "origin needs provider" })
          const origin = payload.origin === undefined ? undefined : originOf(payload.origin)
          if (origin === null) return yield* new BadRequest({ message: `origin is not a URL: ${payload.origin}` })
          const breakersReset = yield* breakers.reset(payload.provider, origin)
          let connectionsReset = 0
          if (payload.connections) {
            if (payload.provider) {
              // A breaker key names a provider and an origin.
              const at = payload.provider.indexOf("@")
              const provider = (at < 0 ? payload.provider : payload.provider.slice(0, at)).toLowerCase()
              const only = at < 0 ? origin : originOf(payload.provider.slice(at + 1))
              const matching = (c: Connection) =>
                (c.provider.id === provider && (only === undefined || originOf(c.effectiveBaseUrl) === only)) ||
                c.name.toLowerCase() === payload.provider!.toLowerCase()
              for (const c of (yield* connections.list).filter(matching)) {
                connectionsReset += yield* cooldowns.reset(c.id)
              }
            } else connectionsReset = yield* cooldowns.reset()
          }
          yield* Effect.logInfo(`resilience reset: ${breakersReset} breakers, ${connectionsReset} connections`)
          return { breakersReset, connectionsReset }
        })
      )
      .handle("modelCooldowns", () => Effect.map(lockouts.list, (list) => ({ modelCooldowns: list.map(lockoutView) })))
      .handle("clearModelCooldowns", ({ payload }) => Effect.map(lockouts.clear(payload), (cleared) => ({ cleared })))
      .handle("rateLimits", () =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const states = yield* connectionStates
          const quotas = memory.quotas()
          return {
            accounts: states.map((s) => {
              const q = quotas.find((r) => r.connectionId === s.id && r.model === undefined)?.info
              const live = q && (q.resetAt === undefined || q.resetAt > now) ? q : undefined
              return {
                id: s.id,
                name: s.name,
                provider: s.provider,
                state: s.state,
                rateLimitedUntil: s.rateLimitedUntil,
                backoffLevel: s.backoffLevel,
                inFlight: s.inFlight,
                max_concurrent: s.max_concurrent,
                quota: live
                  ? {
                      remaining: live.remaining,
                      limit: live.limit ?? null,
                      remainingCount: live.remainingCount ?? null,
                      resetAt: toIso(live.resetAt ?? null),
                      exhausted: live.exhausted === true,
                      reportedAt: new Date(live.at).toISOString()
                    }
                  : null
              }
            }),
            // Inbound limits of the gateway's own keys (docs/guardrails.md "Rate limits").
            inbound: yield* inbound.status
          }
        })
      )
      .handle("rateLimit", () =>
        Effect.gen(function* () {
          const s = config.current()
          const c = yield* inbound.config
          const keys = (yield* inbound.status).length
          return {
            connectionCooldown: s.connectionCooldown,
            quotaShareConcurrencyLimit: s.quotaShareConcurrencyLimit,
            comboCooldownWait: s.comboCooldownWait,
            perKeyRequestLimit: c.autoEnabled ? { rpm: c.defaultRpm, tpm: c.defaultTpm } : null,
            inbound: { ...c, keys }
          }
        })
      )
  })
)
