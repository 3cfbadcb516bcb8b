import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { TokenLimitView } from "../../domain/accounting.js"
import type { BadRequest, NotFound } from "../../domain/errors.js"
import type { Level } from "../../domain/teams.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { makeVersionedReload, StoreVersion } from "../../platform/store/StoreVersion.js"
import { makeTokenLimitStore } from "./tokenLimitStore.js"
import { makeTokenLimitUse } from "./tokenLimitUse.js"
import type { LimitState } from "./tokenLimitWindows.js"
import { Levels } from "./Levels.js"

export { limitApplies } from "./tokenLimitWindows.js"

/** What a request is sent to: the provider id, the upstream model id, and the model as the client wrote it. */
export interface LimitTarget {
  readonly provider: string
  readonly model: string
  readonly requestedModel: string
  /** The connection's name: a limit on `<connection>/<model>` (the catalog's form) applies too. */
  readonly connection?: string
}

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): tokens a request used, which
 * every process adds to the applicable limits' windows. The limits themselves live in the
 * database and are picked up through `refresh`.
 */
export interface TokenUse {
  readonly apiKeyId: string
  readonly target: LimitTarget
  readonly tokens: number
  readonly at: number
}

export type TokenLimitCheck =
  | { readonly ok: true }
  | {
      readonly ok: false
      readonly limit: TokenLimitView
      readonly retryAfterMs: number
      /** The level whose limit is reached (docs/accounting.md, "Limits at every level"). */
      readonly level: Level
      /** How answers name it: `this API key`, `team 'research' (team_ab12)`, `the organisation`. */
      readonly subject: string
    }

export interface TokenLimitsShape {
  /** `GET /api/usage/token-limits`: every key's limit, or those of one subject, or of one level (`all`: every level); oldest first. */
  readonly list: (subject?: string | { readonly level: Level | "all" }) => Effect.Effect<ReadonlyArray<TokenLimitView>>
  /** `POST /api/usage/token-limits` and the CLI: decodes `CreateTokenLimit`; an unknown key is NotFound. */
  readonly create: (input: unknown) => Effect.Effect<TokenLimitView, BadRequest | NotFound>
  /** `DELETE /api/usage/token-limits`: the removed limit. */
  readonly remove: (id: string) => Effect.Effect<TokenLimitView, NotFound>
  /** Request path, synchronous: refused while an applicable limit's used tokens are at or above maxTokens. */
  /** `reserved`: tokens of this key's requests still in flight, counted as if already used. */
  readonly check: (apiKeyId: string | null, target: LimitTarget, now: number, reserved?: number) => TokenLimitCheck
  /** `check` of the levels above the key only (its user, team(s), the organisation). */
  readonly checkAbove: (apiKeyId: string, target: LimitTarget, now: number, reserved?: number) => TokenLimitCheck
  /** Request path: adds input + output tokens to every applicable limit's current window (memory only). */
  readonly record: (apiKeyId: string | null, target: LimitTarget, tokens: number) => Effect.Effect<void>
  /** `record` at `now`, synchronously (the request path). */
  readonly unsafeRecord: (apiKeyId: string | null, target: LimitTarget, tokens: number, now: number) => void
  /** True when token use is exact across processes (`SharedState.totals` on Redis): the pipeline calls `claim`. */
  readonly exact: boolean
  /**
   * Across processes, atomically: refuses while an applicable limit's use plus every process's
   * holds has reached it; else holds `estimate` tokens in each until `release`. `undefined` when
   * the shared store is unreachable (the caller checks its own view with `check`).
   */
  readonly claim: (apiKeyId: string, target: LimitTarget, estimate: number, now: number) => Effect.Effect<TokenLimitClaim | undefined>
  /** Whether the key has a token limit (its `claim` is then a round trip when `exact`). */
  readonly has: (apiKeyId: string) => boolean
  /** Picks up limits another process wrote (only with `StoreVersion` provided; otherwise a no-op). */
  readonly refresh: Effect.Effect<void>
}

export interface TokenLimitClaim {
  readonly check: TokenLimitCheck
  readonly release: () => void
}

/**
 * Token limits of keys and of the levels above them (the organisation, teams, users). Used tokens per limit are loaded from the `usage` table at start (and
 * when a limit is created), then kept in memory: `check` and `record` never touch the database.
 * Recorded use also goes to the other gateway processes on the `token-limits` channel (`SharedState`).
 */
export class TokenLimits extends Context.Tag("gateway/TokenLimits")<TokenLimits, TokenLimitsShape>() {
  static readonly layer = Layer.effect(
    TokenLimits,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const version = yield* Effect.serviceOption(StoreVersion)
      const bus = yield* Effect.serviceOption(EventBus)
      const shared = yield* SharedState.orLocal
      const byId = new Map<string, LimitState>()
      const byKey = new Map<string, Array<LimitState>>()
      const levels = yield* Effect.serviceOption(Levels)
      const lv = levels._tag === "Some" ? levels.value : undefined

      const { loadAll, list, create, remove, levelled } = makeTokenLimitStore({ sql, byId, byKey, levels: lv })
      const refresh = yield* makeVersionedReload(version, loadAll)
      // Opens the `token-limits` channel: after the first load, as the other processes' use adds to the loaded windows.
      const use = makeTokenLimitUse({ byKey, bus, shared, levels: lv, levelled })

      return { list, create, remove, refresh, ...use }
    })
  )
}
