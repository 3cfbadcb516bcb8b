import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

export interface KeyValueShape {
  readonly get: (namespace: string, key: string) => Effect.Effect<Option.Option<string>>
  readonly set: (namespace: string, key: string, value: string) => Effect.Effect<void>
  readonly remove: (namespace: string, key: string) => Effect.Effect<boolean>
  readonly entries: (namespace: string) => Effect.Effect<ReadonlyArray<readonly [string, string]>>
  readonly clear: (namespace: string) => Effect.Effect<number>
}

/** Small settings table (`kv`): feature-flag overrides, the admin password hash, settings. */
export class KeyValue extends Context.Tag("gateway/KeyValue")<KeyValue, KeyValueShape>() {
  static readonly layer = Layer.effect(
    KeyValue,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return {
        get: (namespace, key) =>
          sql<{ value: string }>`SELECT value FROM kv WHERE namespace = ${namespace} AND key = ${key}`.pipe(
            Effect.map((rows) => Option.fromNullable(rows[0]?.value)),
            Effect.orDie
          ),
        set: (namespace, key, value) =>
          sql`INSERT INTO kv (namespace, key, value, updated_at) VALUES (${namespace}, ${key}, ${value}, ${Date.now()})
              ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`.pipe(
            Effect.asVoid,
            Effect.orDie
          ),
        remove: (namespace, key) =>
          sql<{ n: number }>`DELETE FROM kv WHERE namespace = ${namespace} AND key = ${key} RETURNING 1 AS n`.pipe(
            Effect.map((rows) => rows.length > 0),
            Effect.orDie
          ),
        entries: (namespace) =>
          sql<{ key: string; value: string }>`SELECT key, value FROM kv WHERE namespace = ${namespace} ORDER BY key`.pipe(
            Effect.map((rows) => rows.map((r) => [r.key, r.value] as const)),
            Effect.orDie
          ),
        clear: (namespace) =>
          sql<{ n: number }>`DELETE FROM kv WHERE namespace = ${namespace} RETURNING 1 AS n`.pipe(
            Effect.map((rows) => rows.length),
            Effect.orDie
          )
      }
    })
  )
}
