import * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { NotFound } from "../../domain/errors.js"
import { type CloudBundle, type CloudVersionList, type CloudVersionView, VersionConflict } from "../../domain/sync.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"

export interface CloudStoreShape {
  /** Stores a new version of `space`'s bundle when `baseVersion` is its current version (0: none yet); else a 409 naming the current one.
   * */
  readonly put: (space: string, baseVersion: number, ciphertext: string) => Effect.Effect<CloudVersionView, VersionConflict>
  readonly latest: (space: string) => Effect.Effect<CloudBundle, NotFound>
  readonly versions: (space: string) => Effect.Effect<CloudVersionList>
}

/** Kept versions per space (GATEWAY_CLOUD_KEEP_VERSIONS, default 20; at least 1). */
const KeepVersions = Config.integer("GATEWAY_CLOUD_KEEP_VERSIONS").pipe(Config.withDefault(20))

/**
 * The sync server's side: opaque sealed bundles per sync space, versioned 1, 2, 3, ... A put is a
 * compare-and-set on the version; two clients racing from the same base get one 201 and one 409.
 */
export class CloudStore extends Context.Tag("gateway/CloudStore")<CloudStore, CloudStoreShape>() {
  static readonly layer = Layer.effect(
    CloudStore,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const keep = Math.max(1, yield* Effect.orDie(KeepVersions))
      const currentOf = (space: string) =>
        Effect.map(sql<{ v: number | null }>`SELECT MAX(version) AS v FROM cloud_bundles WHERE space = ${space}`, (rows) =>
          Number(rows[0]?.v ?? 0)
        )

      const conflict = (space: string, baseVersion: number, current: number) =>
        new VersionConflict({
          message: `space ${space} is at version ${current}, not ${baseVersion}: pull version ${current} first (or push with force)`,
          currentVersion: current
        })

      const put = (space: string, baseVersion: number, ciphertext: string) =>
        sql
          .withTransaction(
            Effect.gen(function* () {
              const current = yield* currentOf(space)
              if (current !== baseVersion) return yield* Effect.fail(conflict(space, baseVersion, current))
              const version = current + 1
              const createdAt = Date.now()
              yield* sql`INSERT INTO cloud_bundles ${sql.insert({ space, version, ciphertext, size: ciphertext.length, created_at: createdAt })}`
              yield* sql`DELETE FROM cloud_bundles WHERE space = ${space} AND version <= ${version - keep}`
              return { space, version, size: ciphertext.length, createdAt: new Date(createdAt).toISOString() }
            })
          )
          .pipe(
            Effect.catchTag("SqlError", (e) =>
              isUniqueViolation(e)
                ? Effect.flatMap(Effect.orDie(currentOf(space)), (current) => Effect.fail(conflict(space, baseVersion, current)))
                : Effect.die(e)
            ),
            Effect.tap((v) => Effect.logInfo(`cloud bundle ${space} v${v.version} stored (${v.size} bytes)`)),
            Effect.withSpan("CloudStore.put")
          )

      const latest = (space: string) =>
        Effect.flatMap(
          Effect.orDie(
            sql<{
              version: number
              ciphertext: string
              size: number
              created_at: number
            }>`SELECT version, ciphertext, size, created_at FROM cloud_bundles WHERE space = ${space} ORDER BY version DESC LIMIT 1`
          ),
          (rows) =>
            rows[0]
              ? Effect.succeed({
                  space,
                  version: Number(rows[0].version),
                  ciphertext: rows[0].ciphertext,
                  size: Number(rows[0].size),
                  createdAt: new Date(Number(rows[0].created_at)).toISOString()
                })
              : Effect.fail(new NotFound({ message: `space ${space} has no bundle yet` }))
        )

      const versions = (space: string) =>
        Effect.map(
          Effect.orDie(
            sql<{
              version: number
              size: number
              created_at: number
            }>`SELECT version, size, created_at FROM cloud_bundles WHERE space = ${space} ORDER BY version DESC`
          ),
          (rows) => ({
            space,
            current: Number(rows[0]?.version ?? 0),
            versions: rows.map((r) => ({
              version: Number(r.version),
              size: Number(r.size),
              createdAt: new Date(Number(r.created_at)).toISOString()
            }))
          })
        )

      return { put, latest, versions } satisfies CloudStoreShape
    })
  )
}
