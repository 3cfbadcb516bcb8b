import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AdminAuth } from "../../../services/auth/AdminAuth.js"
import { ApiKeys } from "../../../services/auth/ApiKeys.js"
import { AppConfig } from "../../../platform/config/AppConfig.js"
import { BadRequest } from "../../../domain/errors.js"
import { findProvider } from "../../../domain/catalog/catalog.js"
import { Connections } from "../../../upstream/providers/Connections.js"
import { providerEnvVars, readEnvFile, repairEnvFile } from "../../../platform/system/envFile.js"
import { Lifecycle, restartMode } from "../../../platform/system/Lifecycle.js"
import { VERSION } from "../../../kernel/version.js"
import { ManagementApi } from "../Api.js"
import { actor, ManagementAuth } from "../Principal.js"

/** `GET /api/init`: booleans for anyone, details for management callers. */
const initGroup = HttpApiBuilder.group(ManagementApi, "init", (handlers) =>
  Effect.gen(function* () {
    const auth = yield* ManagementAuth
    const admin = yield* AdminAuth
    const keys = yield* ApiKeys
    const connections = yield* Connections
    const config = yield* AppConfig
    const lifecycle = yield* Lifecycle
    return handlers.handle("init", () =>
      Effect.gen(function* () {
        const passwordSet = yield* admin.hasPassword
        const conns = yield* connections.list
        // From memory: this public answer reads no key table.
        const keyCount = yield* keys.keyCount
        const hasAdminKey = yield* keys.hasAdminKey
        const base = {
          version: VERSION,
          passwordSet,
          providersConfigured: conns.length > 0,
          keysConfigured: keyCount > 0,
          setupComplete: (passwordSet || hasAdminKey) && conns.length > 0
        }
        // Credentials that do not verify are answered like none: the public view.
        const authenticated = (yield* Effect.either(auth))._tag === "Right"
        if (!authenticated) return { ...base, authenticated: false }
        return {
          ...base,
          authenticated: true,
          providers: { count: conns.length, enabled: conns.filter((c) => c.enabled).length },
          keys: { count: keyCount },
          dataDir: config.dataDir,
          envFile: lifecycle.envFile,
          restartRequired: yield* lifecycle.restartRequired,
          startedAt: new Date(lifecycle.startedAt).toISOString(),
          pid: process.pid
        }
      })
    )
  })
)

/** Restart, shutdown, env repair. */
const systemGroup = HttpApiBuilder.group(ManagementApi, "system", (handlers) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const lifecycle = yield* Lifecycle
    return handlers
      .handle("restart", () =>
        Effect.gen(function* () {
          const mode = restartMode()
          const accepted = yield* lifecycle.request("restart")
          yield* Effect.logInfo(`restart requested by ${yield* actor}${accepted ? "" : " (a stop is already under way)"}`)
          return {
            accepted,
            action: "restart" as const,
            mode,
            message: accepted
              ? `restarting: no new connections, in-flight requests finish, then ${mode === "supervisor" ? "the gateway starts again on the same port" : `the process exits ${75} for its service manager to start it again`}`
              : "a stop or restart is already under way"
          }
        })
      )
      .handle("shutdown", () =>
        Effect.gen(function* () {
          const accepted = yield* lifecycle.request("shutdown")
          yield* Effect.logInfo(`shutdown requested by ${yield* actor}${accepted ? "" : " (a stop is already under way)"}`)
          return {
            accepted,
            action: "shutdown" as const,
            message: accepted
              ? "shutting down: no new connections, in-flight requests finish, then the process exits 0"
              : "a stop or restart is already under way"
          }
        })
      )
      .handle("envRepair", ({ payload }) =>
        Effect.gen(function* () {
          const provider = findProvider(payload.provider.trim())
          if (!provider)
            return yield* new BadRequest({ message: `provider: unknown provider '${payload.provider}' (see gateway providers available)` })
          const names = providerEnvVars(provider)
          const result = yield* Effect.sync(() => repairEnvFile(lifecycle.envFile, config.dataDir, names))
          const now = yield* Effect.sync(() => readEnvFile(lifecycle.envFile))
          yield* Effect.logInfo(
            `env repair for ${provider.id} by ${yield* actor}: ${result.repaired.length ? `restored ${result.repaired.join(", ")}` : "nothing restored"}`
          )
          return {
            success: true,
            provider: provider.id,
            repaired: result.repaired,
            backupPath: result.backupPath,
            missing: names.filter((n) => !now[n]),
            restartRequired: yield* lifecycle.restartRequired
          }
        })
      )
  })
)

/** The area's groups: `/api/init` and the system actions. */
export const layer = Layer.mergeAll(initGroup, systemGroup)
