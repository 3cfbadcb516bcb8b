/**
 * Memory entries (docs/compression.md): text injected into requests, global or scoped to an API
 * key or a session. Read from their table; each write checks the scope, is audited and drops the
 * snapshot.
 */
import * as Effect from "effect/Effect"
import type { MemoryScope } from "../../domain/context.js"
import { BadRequest, NotFound } from "../../domain/errors.js"
import type { ContextStoreShape } from "./ContextStore.js"
import { type ContextWriteDeps, type MemoryRow, memoryOf, memoryView, newId } from "./contextRows.js"

/** The memory scope's id: required for `key` and `session`, none for `global`. */
const checkScope = (scope: MemoryScope, scopeId: string | null) => {
  if (scope === "global" && scopeId !== null) return Effect.fail(new BadRequest({ message: "scopeId: a global entry has no scopeId" }))
  if (scope !== "global" && scopeId === null)
    return Effect.fail(
      new BadRequest({ message: `scopeId: a ${scope} entry needs the ${scope === "key" ? "API key id" : "session id"} it applies to` })
    )
  return Effect.void
}

type Memory = Pick<ContextStoreShape, "listMemory" | "getMemory" | "createMemory" | "updateMemory" | "removeMemory">

/** The memory entries of the store: listed (by scope, by tag), read, created, edited, removed. */
export const makeContextMemory = ({ sql, invalidate, audit }: Omit<ContextWriteDeps, "snapshot">): Memory => {
  const memoryRow = (id: string) =>
    Effect.flatMap(Effect.orDie(sql<MemoryRow>`SELECT * FROM context_memory WHERE id = ${id}`), (rows) =>
      rows[0] ? Effect.succeed(memoryOf(rows[0])) : Effect.fail(new NotFound({ message: `no memory entry with id '${id}'` }))
    )

  return {
    listMemory: (q) =>
      Effect.map(Effect.orDie(sql<MemoryRow>`SELECT * FROM context_memory ORDER BY created_at, id`), (rows) =>
        rows
          .map(memoryOf)
          .filter((m) => (q.scope === undefined || m.scope === q.scope) && (q.tag === undefined || m.tags.includes(q.tag)))
          .map(memoryView)
      ),
    getMemory: (id) => Effect.map(memoryRow(id), memoryView),
    createMemory: (input, actor) =>
      Effect.gen(function* () {
        yield* checkScope(input.scope, input.scopeId)
        const id = newId("mem")
        const t = Date.now()
        yield* Effect.orDie(
          sql`INSERT INTO context_memory ${sql.insert({
            id,
            text: input.text,
            scope: input.scope,
            scope_id: input.scopeId,
            tags: JSON.stringify(input.tags),
            enabled: input.enabled ? 1 : 0,
            created_at: t,
            updated_at: t
          })}`
        )
        yield* invalidate
        audit(actor, "memory.create", id)
        return memoryView(yield* Effect.orDie(memoryRow(id)))
      }),
    updateMemory: (id, patch, actor) =>
      Effect.gen(function* () {
        const m = yield* memoryRow(id)
        const scope = patch.scope ?? m.scope
        const scopeId = patch.scopeId !== undefined ? patch.scopeId : patch.scope === "global" ? null : m.scopeId
        yield* checkScope(scope, scopeId)
        yield* Effect.orDie(
          sql`UPDATE context_memory SET text = ${patch.text ?? m.text}, scope = ${scope}, scope_id = ${scopeId}, tags = ${JSON.stringify(patch.tags ?? m.tags)}, enabled = ${(patch.enabled ?? m.enabled) ? 1 : 0}, updated_at = ${Date.now()} WHERE id = ${id}`
        )
        yield* invalidate
        audit(actor, "memory.update", id)
        return memoryView(yield* Effect.orDie(memoryRow(id)))
      }),
    removeMemory: (id, actor) =>
      Effect.gen(function* () {
        const m = yield* memoryRow(id)
        yield* Effect.orDie(sql`DELETE FROM context_memory WHERE id = ${id}`)
        yield* invalidate
        audit(actor, "memory.delete", id)
        return memoryView(m)
      })
  }
}
