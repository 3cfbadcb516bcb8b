/**
 * Compression combos (docs/compression.md): named chains of engines, and their assignments to
 * routing combos and models. Read from the snapshot; each write checked (a name that would read as
 * an engine, a name taken, a target another combo holds), audited, and the snapshot dropped.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import type { ContextStoreShape } from "./ContextStore.js"
import { assignmentsOf, type ContextWriteDeps, comboView, newId } from "./contextRows.js"

/** `engine:<id>` in x-gateway-compression names an engine: no combo may be named so. */
const ENGINE_PREFIX = /^engine:/i

const comboNameTaken =
  (name: string) =>
  <A>(e: Effect.Effect<A, SqlError>): Effect.Effect<A, Conflict> =>
    Effect.catchAll(e, (err) =>
      isUniqueViolation(err)
        ? Effect.fail(new Conflict({ message: `a compression combo named '${name}' already exists (names are compared without case)` }))
        : Effect.die(err)
    )
const reserved = (name: string) =>
  ENGINE_PREFIX.test(name)
    ? Effect.fail(new BadRequest({ message: `name: '${name}' would read as an engine in x-gateway-compression; choose another name` }))
    : Effect.void

type Combos = Pick<
  ContextStoreShape,
  "listCombos" | "getCombo" | "createCombo" | "updateCombo" | "removeCombo" | "getAssignments" | "setAssignments"
>

/** The compression combos of the store: listed, read, created, edited, removed, and their assignments read and set. */
export const makeCompressionCombos = ({ sql, snapshot, invalidate, audit }: ContextWriteDeps): Combos => {
  const findCombo = (id: string) =>
    Effect.flatMap(snapshot, (s) => {
      const c = s.byId.get(id)
      return c ? Effect.succeed({ s, c }) : Effect.fail(new NotFound({ message: `no compression combo with id '${id}'` }))
    })

  return {
    listCombos: Effect.map(snapshot, (s) => s.combos.map((c) => comboView(s, c))),
    getCombo: (id) => Effect.map(findCombo(id), ({ s, c }) => comboView(s, c)),
    createCombo: (input, actor) =>
      Effect.gen(function* () {
        yield* reserved(input.name)
        const id = newId("ccombo")
        const t = Date.now()
        yield* sql`INSERT INTO compression_combos ${sql.insert({
          id,
          name: input.name,
          name_key: input.name.toLowerCase(),
          description: input.description,
          engines: JSON.stringify(input.engines),
          created_at: t,
          updated_at: t
        })}`.pipe(comboNameTaken(input.name))
        yield* invalidate
        audit(actor, "compression_combo.create", id)
        const { s, c } = yield* Effect.orDie(findCombo(id))
        return comboView(s, c)
      }),
    updateCombo: (id, patch, actor) =>
      Effect.gen(function* () {
        const { c } = yield* findCombo(id)
        const name = patch.name ?? c.name
        if (patch.name !== undefined) yield* reserved(patch.name)
        yield* sql`UPDATE compression_combos SET name = ${name}, name_key = ${name.toLowerCase()}, description = ${patch.description ?? c.description}, engines = ${JSON.stringify(patch.engines ?? c.steps)}, updated_at = ${Date.now()} WHERE id = ${id}`.pipe(
          comboNameTaken(name)
        )
        yield* invalidate
        audit(actor, "compression_combo.update", id)
        const after = yield* Effect.orDie(findCombo(id))
        return comboView(after.s, after.c)
      }),
    removeCombo: (id, actor) =>
      Effect.gen(function* () {
        const { s, c } = yield* findCombo(id)
        const view = comboView(s, c)
        yield* Effect.orDie(
          sql.withTransaction(
            Effect.zipRight(
              sql`DELETE FROM compression_assignments WHERE combo_id = ${id}`,
              sql`DELETE FROM compression_combos WHERE id = ${id}`
            )
          )
        )
        yield* invalidate
        audit(actor, "compression_combo.delete", id)
        return view
      }),
    getAssignments: (id) => Effect.map(findCombo(id), ({ s }) => assignmentsOf(s, id)),
    setAssignments: (id, a, actor) =>
      Effect.gen(function* () {
        const { s } = yield* findCombo(id)
        // A routing combo or model has one compression combo: taking one another combo holds is a conflict, naming it.
        for (const [kind, targets, map] of [
          ["routingCombos", a.routingCombos, s.routingCombos],
          ["models", a.models, s.models]
        ] as const) {
          for (const t of targets) {
            const holder = map.get(t)
            if (holder !== undefined && holder !== id) {
              return yield* new Conflict({
                message: `${kind}: '${t}' is assigned to compression combo '${s.byId.get(holder)?.name ?? holder}'; remove it there first`
              })
            }
          }
        }
        const t = Date.now()
        yield* Effect.orDie(
          sql.withTransaction(
            Effect.gen(function* () {
              yield* sql`DELETE FROM compression_assignments WHERE combo_id = ${id}`
              for (const target of new Set(a.routingCombos))
                yield* sql`INSERT INTO compression_assignments ${sql.insert({ kind: "routing-combo", target, combo_id: id, created_at: t })}`
              for (const target of new Set(a.models))
                yield* sql`INSERT INTO compression_assignments ${sql.insert({ kind: "model", target, combo_id: id, created_at: t })}`
            })
          )
        )
        yield* invalidate
        audit(actor, "compression_combo.assign", id)
        return assignmentsOf(yield* snapshot, id)
      })
  }
}
