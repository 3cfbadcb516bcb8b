import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { SharedState } from "../../platform/state/SharedState.js"
import { loadHealth, makeCooldownWriter } from "./cooldownRows.js"
import { makeCooldownState } from "./cooldownState.js"
import { ResilienceConfig } from "./ResilienceConfig.js"
import type { Classification, ConnectionHealth, ConnectionRef, FailureInfo, TerminalState } from "./types.js"

export { WRITE_INTERVAL } from "./cooldownRows.js"

export type Availability = {
  readonly ok: boolean
  readonly state: "available" | "cooldown" | TerminalState
  /** End of the cooldown (epoch ms) while cooling down; null otherwise. */
  readonly until: number | null
}

export interface CooldownsShape {
  /** The connection's health at `now`; a cooldown whose time passed reads as available. */
  readonly healthAt: (connectionId: string, now: number) => ConnectionHealth
  /** Whether the connection may take a request at `now`, and why not. */
  readonly availability: (connectionId: string, now: number) => Availability
  /** Records a classified failure (terminal state, cooldown, or just the last error). */
  readonly onFailure: (conn: ConnectionRef, c: Classification, f: FailureInfo) => Effect.Effect<ConnectionHealth>
  /** A request succeeded: every error field, the backoff level and any terminal state cleared. */
  readonly onSuccess: (connectionId: string) => Effect.Effect<void>
  /** `onSuccess`, synchronously (the request path). */
  readonly unsafeOnSuccess: (connectionId: string) => void
  /** Operator reset (one connection or all; also clears terminal states); how many were reset. */
  readonly reset: (connectionId?: string) => Effect.Effect<number>
  /** Credentials changed or the connection was removed: drop its state (the row is reset by its owner). */
  readonly forget: (connectionId: string) => Effect.Effect<void>
  /** Every connection with recorded state, sorted by id. */
  readonly list: Effect.Effect<ReadonlyArray<{ readonly connectionId: string } & ConnectionHealth>>
  /** Writes every pending change now (tests, shutdown). */
  readonly flush: Effect.Effect<void>
}

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): a connection's health after
 * a change, or that it was cleared. The process that made the change writes the row.
 */
export type CooldownChange =
  | { readonly op: "set"; readonly id: string; readonly health: ConnectionHealth }
  | { readonly op: "clear"; readonly id: string }
  | { readonly op: "clearAll" }

/**
 * Connection cooldowns and terminal states: in memory and authoritative for the request path, written behind to the
 * `connections` row so they survive a restart (docs/resilience.md#connection-cooldown-and-terminal-states); changes also
 * go out on the `cooldowns` channel. Rules: cooldownState.ts; rows: cooldownRows.ts.
 */
export class Cooldowns extends Context.Tag("gateway/Cooldowns")<Cooldowns, CooldownsShape>() {
  static readonly layer = Layer.scoped(
    Cooldowns,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const config = yield* ResilienceConfig
      const shared = yield* SharedState.orLocal
      const entries = new Map<string, ConnectionHealth>()

      const writer = yield* makeCooldownWriter({ sql, entries })
      yield* loadHealth(sql, entries)
      const { healthAt, availability, onFailure, unsafeOnSuccess, reset, forget, list } = makeCooldownState({
        entries,
        config,
        shared,
        writer
      })
      // Registered before the worker so that it runs after the worker has been interrupted.
      yield* Effect.addFinalizer(() => writer.writeDirty)
      yield* Effect.forkScoped(writer.worker)

      return {
        healthAt,
        availability,
        onFailure,
        onSuccess: (id) => Effect.sync(() => unsafeOnSuccess(id)),
        unsafeOnSuccess,
        reset,
        forget,
        list,
        flush: writer.writeDirty
      }
    })
  )
}
