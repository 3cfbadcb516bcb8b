import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as crypto from "node:crypto"
import type {
  CompressionAssignments,
  CompressionComboView,
  ContextSkillView,
  CreateCompressionCombo,
  CreateContextSkill,
  CreateMemory,
  EngineStep,
  MemoryScope,
  MemoryView,
  UpdateCompressionCombo,
  UpdateContextSkill,
  UpdateMemory
} from "../../domain/context.js"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import { countText } from "./estimate.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { toIso } from "../../platform/store/Db.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"

/** A compression combo as the request path uses it. */
export interface CompressionCombo {
  readonly id: string
  readonly name: string
  readonly description: string
  readonly steps: ReadonlyArray<EngineStep>
  readonly createdAt: number
  readonly updatedAt: number
}

export interface MemoryEntry {
  readonly id: string
  readonly text: string
  readonly scope: MemoryScope
  readonly scopeId: string | null
  readonly tags: ReadonlyArray<string>
  readonly enabled: boolean
  readonly tokens: number
  readonly createdAt: number
  readonly updatedAt: number
}

export interface ContextSkill {
  readonly id: string
  readonly name: string
  readonly source: "catalog" | "custom"
  readonly catalogId: string | null
  readonly text: string
  readonly trigger: { readonly always: boolean; readonly keywords: ReadonlyArray<string>; readonly models: ReadonlyArray<string> }
  readonly enabled: boolean
  readonly tokens: number
  readonly createdAt: number
  readonly updatedAt: number
}

/** Everything the request path reads, loaded whole and kept until a write (here or in another process). */
export interface ContextSnapshot {
  readonly combos: ReadonlyArray<CompressionCombo>
  readonly byId: ReadonlyMap<string, CompressionCombo>
  /** By lower-cased name. */
  readonly byName: ReadonlyMap<string, CompressionCombo>
  /** Routing combo name → compression combo id. */
  readonly routingCombos: ReadonlyMap<string, string>
  /** Model (`provider/model`, `connection/model` or an id as asked) → compression combo id. */
  readonly models: ReadonlyMap<string, string>
  /** Enabled memory entries, oldest first. */
  readonly memory: ReadonlyArray<MemoryEntry>
  /** Enabled skills, oldest first. */
  readonly skills: ReadonlyArray<ContextSkill>
}

export interface ContextStoreShape {
  readonly snapshot: Effect.Effect<ContextSnapshot>
  /** The snapshot when known fresh without a read (the request path). */
  readonly peek: () => ContextSnapshot | undefined
  readonly listCombos: Effect.Effect<ReadonlyArray<CompressionComboView>>
  readonly getCombo: (id: string) => Effect.Effect<CompressionComboView, NotFound>
  readonly createCombo: (input: CreateCompressionCombo, actor: string) => Effect.Effect<CompressionComboView, BadRequest | Conflict>
  readonly updateCombo: (id: string, patch: UpdateCompressionCombo, actor: string) => Effect.Effect<CompressionComboView, BadRequest | Conflict | NotFound>
  readonly removeCombo: (id: string, actor: string) => Effect.Effect<CompressionComboView, NotFound>
  readonly getAssignments: (id: string) => Effect.Effect<CompressionAssignments, NotFound>
  readonly setAssignments: (id: string, a: CompressionAssignments, actor: string) => Effect.Effect<CompressionAssignments, NotFound | Conflict>
  readonly listMemory: (q: { readonly scope?: MemoryScope; readonly tag?: string }) => Effect.Effect<ReadonlyArray<MemoryView>>
  readonly getMemory: (id: string) => Effect.Effect<MemoryView, NotFound>
  readonly createMemory: (input: CreateMemory, actor: string) => Effect.Effect<MemoryView, BadRequest>
  readonly updateMemory: (id: string, patch: UpdateMemory, actor: string) => Effect.Effect<MemoryView, BadRequest | NotFound>
  readonly removeMemory: (id: string, actor: string) => Effect.Effect<MemoryView, NotFound>
  readonly listSkills: Effect.Effect<ReadonlyArray<ContextSkillView>>
  readonly getSkill: (id: string) => Effect.Effect<ContextSkillView, NotFound>
  /** `catalogText` reads an agent-skill catalog file (the caller's, so this store needs no catalog). */
  readonly createSkill: (
    input: CreateContextSkill,
    catalogText: (id: string) => Effect.Effect<string | undefined>,
    actor: string
  ) => Effect.Effect<ContextSkillView, BadRequest | Conflict>
  readonly updateSkill: (id: string, patch: UpdateContextSkill, actor: string) => Effect.Effect<ContextSkillView, BadRequest | Conflict | NotFound>
  readonly removeSkill: (id: string, actor: string) => Effect.Effect<ContextSkillView, NotFound>
}

interface ComboRow {
  readonly id: string
  readonly name: string
  readonly description: string
  readonly engines: string
  readonly created_at: number
  readonly updated_at: number
}
interface MemoryRow {
  readonly id: string
  readonly text: string
  readonly scope: string
  readonly scope_id: string | null
  readonly tags: string
  readonly enabled: number
  readonly created_at: number
  readonly updated_at: number
}
interface SkillRow {
  readonly id: string
  readonly name: string
  readonly source: string
  readonly catalog_id: string | null
  readonly text: string
  readonly trigger: string
  readonly enabled: number
  readonly created_at: number
  readonly updated_at: number
}

const parseJson = <A>(text: string, fallback: A): A => {
  try {
    return JSON.parse(text) as A
  } catch {
    return fallback
  }
}

const scopeOf = (s: string): MemoryScope => (s === "key" || s === "session" ? s : "global")
const newId = (prefix: string) => `${prefix}_${crypto.randomBytes(8).toString("hex")}`

const comboOf = (r: ComboRow): CompressionCombo => ({
  id: r.id,
  name: r.name,
  description: r.description,
  steps: parseJson<Array<EngineStep>>(r.engines, []),
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at)
})
const memoryOf = (r: MemoryRow): MemoryEntry => ({
  id: r.id,
  text: r.text,
  scope: scopeOf(r.scope),
  scopeId: r.scope_id,
  tags: parseJson<Array<string>>(r.tags, []),
  enabled: Number(r.enabled) === 1,
  tokens: countText(r.text),
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at)
})
const skillOf = (r: SkillRow): ContextSkill => {
  const t = parseJson<Partial<ContextSkill["trigger"]>>(r.trigger, {})
  return {
    id: r.id,
    name: r.name,
    source: r.source === "catalog" ? "catalog" : "custom",
    catalogId: r.catalog_id,
    text: r.text,
    trigger: { always: t.always === true, keywords: Array.isArray(t.keywords) ? t.keywords : [], models: Array.isArray(t.models) ? t.models : [] },
    enabled: Number(r.enabled) === 1,
    tokens: countText(r.text),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at)
  }
}
const memoryView = (m: MemoryEntry): MemoryView => ({ ...m, tags: [...m.tags], createdAt: toIso(m.createdAt)!, updatedAt: toIso(m.updatedAt)! })
const skillView = (s: ContextSkill): ContextSkillView => ({
  ...s,
  trigger: { always: s.trigger.always, keywords: [...s.trigger.keywords], models: [...s.trigger.models] },
  createdAt: toIso(s.createdAt)!,
  updatedAt: toIso(s.updatedAt)!
})

/** The memory scope's id: required for `key` and `session`, none for `global`. */
const checkScope = (scope: MemoryScope, scopeId: string | null) => {
  if (scope === "global" && scopeId !== null) return Effect.fail(new BadRequest({ message: "scopeId: a global entry has no scopeId" }))
  if (scope !== "global" && scopeId === null)
    return Effect.fail(new BadRequest({ message: `scopeId: a ${scope} entry needs the ${scope === "key" ? "API key id" : "session id"} it applies to` }))
  return Effect.void
}

/**
 * Compression combos, their assignments, memory entries and injected skills (docs/compression.md):
 * tables of migration 0018, read whole into a snapshot the request path peeks, reloaded when this
 * process writes or another process commits.
 */
export class ContextStore extends Context.Tag("gateway/ContextStore")<ContextStore, ContextStoreShape>() {
  static readonly layer = Layer.effect(
    ContextStore,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const version = yield* StoreVersion
      const writer = yield* BatchWriter

      const load = Effect.gen(function* () {
        const combos = (yield* sql<ComboRow>`SELECT * FROM compression_combos ORDER BY created_at, id`).map(comboOf)
        const assignments = yield* sql<{ kind: string; target: string; combo_id: string }>`SELECT kind, target, combo_id FROM compression_assignments ORDER BY kind, target`
        const memory = (yield* sql<MemoryRow>`SELECT * FROM context_memory WHERE enabled = 1 ORDER BY created_at, id`).map(memoryOf)
        const skills = (yield* sql<SkillRow>`SELECT * FROM context_skills WHERE enabled = 1 ORDER BY created_at, id`).map(skillOf)
        const routingCombos = new Map<string, string>()
        const models = new Map<string, string>()
        for (const a of assignments) (a.kind === "routing-combo" ? routingCombos : models).set(a.target, a.combo_id)
        return {
          combos,
          byId: new Map(combos.map((c) => [c.id, c])),
          byName: new Map(combos.map((c) => [c.name.toLowerCase(), c])),
          routingCombos,
          models,
          memory,
          skills
        } satisfies ContextSnapshot
      }).pipe(Effect.orDie)
      const cache = makeCachedLoad(version, load)
      const audit = (actor: string, action: string, target: string) => writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })
      const run = <A>(effect: Effect.Effect<A, SqlError>) => Effect.orDie(effect)

      const assignmentsOf = (s: ContextSnapshot, id: string): CompressionAssignments => ({
        routingCombos: [...s.routingCombos].filter(([, c]) => c === id).map(([t]) => t),
        models: [...s.models].filter(([, c]) => c === id).map(([t]) => t)
      })
      const comboView = (s: ContextSnapshot, c: CompressionCombo): CompressionComboView => ({
        id: c.id,
        name: c.name,
        description: c.description,
        engines: c.steps,
        assignments: assignmentsOf(s, c.id),
        createdAt: toIso(c.createdAt)!,
        updatedAt: toIso(c.updatedAt)!
      })
      const findCombo = (id: string) =>
        Effect.flatMap(cache.get, (s) => {
          const c = s.byId.get(id)
          return c ? Effect.succeed({ s, c }) : Effect.fail(new NotFound({ message: `no compression combo with id '${id}'` }))
        })
      const comboNameTaken =
        (name: string) =>
        <A>(e: Effect.Effect<A, SqlError>): Effect.Effect<A, Conflict> =>
          Effect.catchAll(e, (err) =>
            isUniqueViolation(err)
              ? Effect.fail(new Conflict({ message: `a compression combo named '${name}' already exists (names are compared without case)` }))
              : Effect.die(err)
          )
      const reserved = (name: string) =>
        ENGINE_PREFIX.test(name) ? Effect.fail(new BadRequest({ message: `name: '${name}' would read as an engine in x-gateway-compression; choose another name` })) : Effect.void

      const memoryRow = (id: string) =>
        Effect.flatMap(run(sql<MemoryRow>`SELECT * FROM context_memory WHERE id = ${id}`), (rows) =>
          rows[0] ? Effect.succeed(memoryOf(rows[0])) : Effect.fail(new NotFound({ message: `no memory entry with id '${id}'` }))
        )
      const skillRow = (id: string) =>
        Effect.flatMap(run(sql<SkillRow>`SELECT * FROM context_skills WHERE id = ${id}`), (rows) =>
          rows[0] ? Effect.succeed(skillOf(rows[0])) : Effect.fail(new NotFound({ message: `no skill with id '${id}'` }))
        )
      const skillNameTaken =
        (name: string) =>
        <A>(e: Effect.Effect<A, SqlError>): Effect.Effect<A, Conflict> =>
          Effect.catchAll(e, (err) => (isUniqueViolation(err) ? Effect.fail(new Conflict({ message: `a skill named '${name}' already exists` })) : Effect.die(err)))

      return {
        snapshot: cache.get,
        peek: cache.peek,
        listCombos: Effect.map(cache.get, (s) => s.combos.map((c) => comboView(s, c))),
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
            yield* cache.invalidate
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
            yield* cache.invalidate
            audit(actor, "compression_combo.update", id)
            const after = yield* Effect.orDie(findCombo(id))
            return comboView(after.s, after.c)
          }),
        removeCombo: (id, actor) =>
          Effect.gen(function* () {
            const { s, c } = yield* findCombo(id)
            const view = comboView(s, c)
            yield* run(sql.withTransaction(Effect.zipRight(sql`DELETE FROM compression_assignments WHERE combo_id = ${id}`, sql`DELETE FROM compression_combos WHERE id = ${id}`)))
            yield* cache.invalidate
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
                  return yield* new Conflict({ message: `${kind}: '${t}' is assigned to compression combo '${s.byId.get(holder)?.name ?? holder}'; remove it there first` })
                }
              }
            }
            const t = Date.now()
            yield* run(
              sql.withTransaction(
                Effect.gen(function* () {
                  yield* sql`DELETE FROM compression_assignments WHERE combo_id = ${id}`
                  for (const target of new Set(a.routingCombos))
                    yield* sql`INSERT INTO compression_assignments ${sql.insert({ kind: "routing-combo", target, combo_id: id, created_at: t })}`
                  for (const target of new Set(a.models)) yield* sql`INSERT INTO compression_assignments ${sql.insert({ kind: "model", target, combo_id: id, created_at: t })}`
                })
              )
            )
            yield* cache.invalidate
            audit(actor, "compression_combo.assign", id)
            return assignmentsOf(yield* cache.get, id)
          }),

        listMemory: (q) =>
          Effect.map(run(sql<MemoryRow>`SELECT * FROM context_memory ORDER BY created_at, id`), (rows) =>
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
            yield* run(
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
            yield* cache.invalidate
            audit(actor, "memory.create", id)
            return memoryView(yield* Effect.orDie(memoryRow(id)))
          }),
        updateMemory: (id, patch, actor) =>
          Effect.gen(function* () {
            const m = yield* memoryRow(id)
            const scope = patch.scope ?? m.scope
            const scopeId = patch.scopeId !== undefined ? patch.scopeId : patch.scope === "global" ? null : m.scopeId
            yield* checkScope(scope, scopeId)
            yield* run(
              sql`UPDATE context_memory SET text = ${patch.text ?? m.text}, scope = ${scope}, scope_id = ${scopeId}, tags = ${JSON.stringify(patch.tags ?? m.tags)}, enabled = ${(patch.enabled ?? m.enabled) ? 1 : 0}, updated_at = ${Date.now()} WHERE id = ${id}`
            )
            yield* cache.invalidate
            audit(actor, "memory.update", id)
            return memoryView(yield* Effect.orDie(memoryRow(id)))
          }),
        removeMemory: (id, actor) =>
          Effect.gen(function* () {
            const m = yield* memoryRow(id)
            yield* run(sql`DELETE FROM context_memory WHERE id = ${id}`)
            yield* cache.invalidate
            audit(actor, "memory.delete", id)
            return memoryView(m)
          }),

        listSkills: Effect.map(run(sql<SkillRow>`SELECT * FROM context_skills ORDER BY created_at, id`), (rows) => rows.map((r) => skillView(skillOf(r)))),
        getSkill: (id) => Effect.map(skillRow(id), skillView),
        createSkill: (input, catalogText, actor) =>
          Effect.gen(function* () {
            if ((input.catalogId === undefined) === (input.text === undefined)) {
              return yield* new BadRequest({ message: "a skill takes either catalogId (an agent-skill catalog id) or text (custom instructions), one of them" })
            }
            let text = input.text
            if (input.catalogId !== undefined) {
              text = yield* catalogText(input.catalogId)
              if (text === undefined) return yield* new BadRequest({ message: `catalogId: no agent skill '${input.catalogId}' (GET /api/agent-skills lists them)` })
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
            yield* cache.invalidate
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
            yield* cache.invalidate
            audit(actor, "context_skill.update", id)
            return skillView(yield* Effect.orDie(skillRow(id)))
          }),
        removeSkill: (id, actor) =>
          Effect.gen(function* () {
            const s = yield* skillRow(id)
            yield* run(sql`DELETE FROM context_skills WHERE id = ${id}`)
            yield* cache.invalidate
            audit(actor, "context_skill.delete", id)
            return skillView(s)
          })
      } satisfies ContextStoreShape
    })
  )
}

/** `engine:<id>` in x-gateway-compression names an engine: no combo may be named so. */
const ENGINE_PREFIX = /^engine:/i
