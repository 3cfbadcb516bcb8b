/**
 * Policy documents in the `policies` table (docs/guardrails.md): every version of each named
 * policy is a row; creating one stores the next version, deleting one marks its versions deleted
 * (they stay in the history). What applies is the current version of each name not deleted.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { BadRequest, NotFound } from "../../domain/errors.js"
import type { CreatePolicy, PolicyView } from "../../domain/policies.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import type { PoliciesShape } from "./Policies.js"

interface Row {
  readonly id: string
  readonly name: string
  readonly version: number
  readonly document: string
  readonly created_at: number
  readonly created_by: string
  readonly deleted_at: number | null
}

const toView = (r: Row): PolicyView => {
  const d = JSON.parse(r.document) as Partial<CreatePolicy>
  return {
    id: r.id,
    name: r.name,
    version: Number(r.version),
    description: d.description ?? null,
    enabled: d.enabled ?? true,
    tools: d.tools ?? null,
    models: d.models ?? null,
    maxTokens: d.maxTokens ?? null,
    maxCostUsd: d.maxCostUsd ?? null,
    blockedTerms: d.blockedTerms ?? null,
    createdAt: new Date(Number(r.created_at)).toISOString(),
    createdBy: r.created_by
  }
}

const RULE_FIELDS = ["tools", "models", "maxTokens", "maxCostUsd", "blockedTerms"] as const

/** The current version of each name that is not deleted (`all` sorted by name, newest version first). */
const current = (all: ReadonlyArray<Row>): ReadonlyArray<Row> => {
  const seen = new Set<string>()
  const out: Array<Row> = []
  for (const r of all) {
    if (seen.has(r.name)) continue
    seen.add(r.name)
    if (r.deleted_at === null) out.push(r)
  }
  return out
}

/** The policies in force: the current version of each name that is not deleted. */
export const loadCurrent = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyArray<PolicyView>> =>
  Effect.map(sql<Row>`SELECT * FROM policies ORDER BY name, version DESC`.pipe(Effect.orDie), (all) => current(all).map(toView))

export interface PolicyVersionsDeps {
  readonly sql: SqlClient.SqlClient
  /** Runs after each write: the snapshot of the policies in force reloads. */
  readonly changed: Effect.Effect<void>
}

/**
 * Reading a policy's history and writing versions: a document needs at least one rule; the next
 * version number is taken under the table's UNIQUE (name, version), tried again when another
 * writer took it first. `changed` runs after each write (the snapshot reloads).
 */
export const makePolicyVersions = (deps: PolicyVersionsDeps): Pick<PoliciesShape, "get" | "create" | "remove"> => {
  const { sql, changed } = deps

  const byIdOrName = (idOrName: string) =>
    Effect.map(
      sql<Row>`SELECT * FROM policies WHERE name = ${idOrName} OR name = (SELECT name FROM policies WHERE id = ${idOrName}) ORDER BY version DESC`.pipe(
        Effect.orDie
      ),
      (r) => r
    )

  return {
    get: (idOrName) =>
      Effect.flatMap(byIdOrName(idOrName), (all) => {
        if (all.length === 0) return Effect.fail(new NotFound({ message: `no policy with id or name '${idOrName}'` }))
        const head = all[0]!
        return Effect.succeed({
          policy: head.deleted_at === null ? toView(head) : null,
          history: all.map((r) => ({
            ...toView(r),
            deletedAt: r.deleted_at === null ? null : new Date(Number(r.deleted_at)).toISOString()
          }))
        })
      }),
    create: (input, actor) =>
      Effect.gen(function* () {
        if (!RULE_FIELDS.some((k) => input[k] !== undefined)) {
          return yield* Effect.fail(new BadRequest({ message: `a policy needs at least one rule: ${RULE_FIELDS.join(", ")}` }))
        }
        if (input.tools && !input.tools.allow?.length && !input.tools.deny?.length) {
          return yield* Effect.fail(new BadRequest({ message: "tools: give a non-empty allow or deny list" }))
        }
        for (const [key, list] of Object.entries(input.models ?? {})) {
          if (list.length === 0)
            return yield* Effect.fail(
              new BadRequest({
                message: `models["${key}"]: give at least one model id or pattern (an empty list would refuse every model)`
              })
            )
        }
        const { name, ...document } = input
        for (let tries = 0; ; tries++) {
          const [last] = yield* sql<{ v: number | null }>`SELECT MAX(version) AS v FROM policies WHERE name = ${name}`.pipe(Effect.orDie)
          const next = Number(last?.v ?? 0) + 1
          const row: Row = {
            id: `pol_${crypto.randomBytes(8).toString("hex")}`,
            name,
            version: next,
            document: JSON.stringify(document),
            created_at: Date.now(),
            created_by: actor,
            deleted_at: null
          }
          const inserted = yield* sql`INSERT INTO policies ${sql.insert(row as never)}`.pipe(
            Effect.as(true),
            Effect.catchAll((e) => (isUniqueViolation(e) && tries < 5 ? Effect.succeed(false) : Effect.die(e)))
          )
          if (inserted) {
            yield* changed
            return toView(row)
          }
        }
      }),
    remove: (idOrName, _actor) =>
      Effect.gen(function* () {
        const all = yield* byIdOrName(idOrName)
        const head = all[0]
        if (!head || head.deleted_at !== null)
          return yield* Effect.fail(new NotFound({ message: `no current policy with id or name '${idOrName}'` }))
        yield* sql`UPDATE policies SET deleted_at = ${Date.now()} WHERE name = ${head.name} AND deleted_at IS NULL`.pipe(Effect.orDie)
        yield* changed
        return toView(head)
      })
  }
}
