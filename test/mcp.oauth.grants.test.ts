import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as SqlClient from "@effect/sql/SqlClient"
import type { McpServerRecord } from "../src/domain/mcpServers.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import * as Db from "../src/platform/store/Db.js"
import { Secrets } from "../src/platform/store/Secrets.js"
import { makeGrantStore, readGrants } from "../src/services/mcp/mcpOAuthGrants.js"
import { tempDir } from "./support/gateway.js"

/**
 * src/services/mcp/mcpOAuthGrants.ts on a real SQLite file: a sign-out against a token refresh
 * that was in flight (the schedule refreshes ahead of expiry; a connection refreshes on a 401).
 */
const quiet = Logger.replace(Logger.defaultLogger, Logger.none)
const layerAt = (dataDir: string) =>
  Layer.mergeAll(Db.layer, Secrets.layer).pipe(Layer.provide(AppConfig.layerTest({ dataDir })), Layer.provide(quiet))

const server: McpServerRecord = {
  id: "mcp_test1",
  name: "remote",
  transport: "http",
  command: null,
  args: [],
  env: {},
  cwd: null,
  url: "http://127.0.0.1:9/mcp",
  headers: {},
  allowedTools: [],
  timeoutMs: 30_000,
  rpm: null,
  enabled: true,
  oauth: null,
  createdAt: 0,
  updatedAt: 0
}

const storeOf = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const secrets = yield* Secrets
  const run = Runtime.runPromise(yield* Effect.runtime<never>())
  const store = yield* makeGrantStore({ sql, secrets, version: Option.none(), run, tokensChanged: Effect.void })
  const stored = () => Effect.map(readGrants(sql, secrets), (g) => g.get(server.id)?.tokens ?? null)
  return { store, access: store.accessOf(server), stored }
})

describe("MCP OAuth grants", () => {
  it.effect("a refresh that ends after a sign-out does not sign the server back in", () =>
    Effect.gen(function* () {
      const { store, access, stored } = yield* storeOf
      yield* Effect.promise(() =>
        access.saveTokens({ access_token: "at-1", token_type: "Bearer", expires_in: 2, refresh_token: "rt-1" }, true)
      )
      expect(store.grantOf(server)?.tokens?.access_token).toBe("at-1")
      // The sign-out (mcpOAuthSignIn.ts, `logout`), while a refresh of rt-1 is on its way...
      yield* store.save(server, () => ({ tokens: null, expiresAt: null, obtainedAt: null, refreshError: null }))
      // ...which then lands with its new tokens.
      yield* Effect.promise(() =>
        access.saveTokens({ access_token: "at-2", token_type: "Bearer", expires_in: 2, refresh_token: "rt-2" }, false)
      )
      expect(store.grantOf(server)?.tokens ?? null).toBeNull()
      expect(yield* stored()).toBeNull()
    }).pipe(Effect.provide(layerAt(tempDir())))
  )

  it.effect("a refresh replaces the tokens it refreshed; a sign-in after a sign-out keeps its own", () =>
    Effect.gen(function* () {
      const { store, access, stored } = yield* storeOf
      yield* Effect.promise(() =>
        access.saveTokens({ access_token: "at-1", token_type: "Bearer", expires_in: 2, refresh_token: "rt-1" }, true)
      )
      yield* Effect.promise(() =>
        access.saveTokens({ access_token: "at-2", token_type: "Bearer", expires_in: 2, refresh_token: "rt-2" }, false)
      )
      expect(store.grantOf(server)?.tokens?.access_token).toBe("at-2")
      expect((yield* stored())?.refresh_token).toBe("rt-2")
      yield* store.save(server, () => ({ tokens: null, expiresAt: null, obtainedAt: null, refreshError: null }))
      yield* Effect.promise(() =>
        access.saveTokens({ access_token: "at-3", token_type: "Bearer", expires_in: 2, refresh_token: "rt-3" }, true)
      )
      expect(store.grantOf(server)?.tokens?.access_token).toBe("at-3")
      expect(store.grantOf(server)?.signedInAt).not.toBeNull()
      expect((yield* stored())?.access_token).toBe("at-3")
    }).pipe(Effect.provide(layerAt(tempDir())))
  )
})
