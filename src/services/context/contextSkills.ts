/**
 * Injected skills (docs/compression.md): an agent-skill catalog file or custom instructions, added
 * to requests by trigger (always, keywords, models). Read from their table; each write checked,
 * audited, and the snapshot dropped.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import type { ContextStoreShape } from "./ContextStore.js"
import { type ContextWriteDeps, newId, type SkillRow, skillOf, skillView } from "./contextRows.js"

const skillNameTaken =
  (name: string) =>
  <A>(e: Effect.Effect<A, SqlError>): Effect.Effect<A, Conflict> =>
    Effect.catchAll(e, (err) =>
      isUniqueViolation(err) ? Effect.fail(new Conflict({ message: `a skill named '${name}' already exists` })) : Effect.die(err)
    )

type Skills = Pick<ContextStoreShape, "listSkills" | "getSkill" | "createSkill" | "updateSkill" | "removeSkill">

/** The injected skills of the store: listed, read, created (from the catalog or custom text), edited, removed. */
export const makeContextSkills = ({ sql, invalidate, audit }: Omit<ContextWriteDeps, "snapshot">): Skills => {
  const skillRow = (id: string) =>
    Effect.flatMap(Effect.orDie(sql<SkillRow>`SELECT * FROM context_skills WHERE id = ${id}`), (rows) =>
      rows[0] ? Effect.succeed(skillOf(rows[0])) : Effect.fail(new NotFound({ message: `no skill with id '${id}'` }))
    )

  return {
    listSkills: Effect.map(Effect.orDie(sql<SkillRow>`SELECT * FROM context_skills ORDER BY created_at, id`), (rows) =>
      rows.map((r) => skillView(skillOf(r)))
    ),
    getSkill: (id) => Effect.map(skillRow(id), skillView),
    createSkill: (input, catalogText, actor) =>
      Effect.gen(function* () {
        if ((input.catalogId === undefined) === (input.text === undefined)) {
          return yield* new BadRequest({
            message: "a skill takes either catalogId (an agent-skill catalog id) or text (custom instructions), one of them"
          })
        }
        let text = input.text
        if (input.catalogId !== undefined) {
          text = yield* catalogText(input.catalogId)
          if (text === undefined)
            return yield* new BadRequest({ message: `catalogId: no agent skill '${input.catalogId}' (GET /api/agent-skills lists them)` })
        }
        const id = newId("skill")
        const t = Date.now()
        yield* sql`INSERT INTO context_skills ${sql.insert({
          id,
          name: input.name,
          source: input.catalogId !== undefined ? "catalog" : "custom",
          catalog_id: input.catalogId ?? null,
          text: text!,
          trigger: JSON.stringify(input.trigger),
          enabled: input.enabled ? 1 : 0,
          created_at: t,
          updated_at: t
        })}`.pipe(skillNameTaken(input.name))
        yield* invalidate
        audit(actor, "context_skill.create", id)
        return skillView(yield* Effect.orDie(skillRow(id)))
      }),
    updateSkill: (id, patch, actor) =>
      Effect.gen(function* () {
        const s = yield* skillRow(id)
        if (patch.text !== undefined && s.source === "catalog") {
          return yield* new BadRequest({ message: "text: a catalog skill's text is its catalog file; create a custom skill to change it" })
        }
        const name = patch.name ?? s.name
        yield* sql`UPDATE context_skills SET name = ${name}, text = ${patch.text ?? s.text}, trigger = ${JSON.stringify(patch.trigger ?? s.trigger)}, enabled = ${(patch.enabled ?? s.enabled) ? 1 : 0}, updated_at = ${Date.now()} WHERE id = ${id}`.pipe(
          skillNameTaken(name)
        )
        yield* invalidate
        audit(actor, "context_skill.update", id)
        return skillView(yield* Effect.orDie(skillRow(id)))
      }),
    removeSkill: (id, actor) =>
      Effect.gen(function* () {
        const s = yield* skillRow(id)
        yield* Effect.orDie(sql`DELETE FROM context_skills WHERE id = ${id}`)
        yield* invalidate
        audit(actor, "context_skill.delete", id)
        return skillView(s)
      })
  }
}
