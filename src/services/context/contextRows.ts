/**
 * The context tables of migration 0018 (compression combos and their assignments, memory entries,
 * injected skills) as rows, as the request path's values and as the management API's views, and
 * the snapshot the request path reads, loaded whole.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import type {
  CompressionAssignments,
  CompressionComboView,
  ContextSkillView,
  EngineStep,
  MemoryScope,
  MemoryView
} from "../../domain/context.js"
import { toIso } from "../../platform/store/Db.js"
import type { CompressionCombo, ContextSkill, ContextSnapshot, MemoryEntry } from "./ContextStore.js"
import { countText } from "./estimate.js"

interface ComboRow {
  readonly id: string
  readonly name: string
  readonly description: string
  readonly engines: string
  readonly created_at: number
  readonly updated_at: number
}
export interface MemoryRow {
  readonly id: string
  readonly text: string
  readonly scope: string
  readonly scope_id: string | null
  readonly tags: string
  readonly enabled: number
  readonly created_at: number
  readonly updated_at: number
}
export interface SkillRow {
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

/** What the writes of every context table share: the database, the cached snapshot and the audit log. */
export interface ContextWriteDeps {
  readonly sql: SqlClient.SqlClient
  /** The snapshot (cached; reloaded after `invalidate`). */
  readonly snapshot: Effect.Effect<ContextSnapshot>
  /** Drops the cached snapshot after a write: the next read (here or in the request path) reloads it. */
  readonly invalidate: Effect.Effect<void>
  /** Queues an audit row (the batched writer's: not awaited, never fails). */
  readonly audit: (actor: string, action: string, target: string) => void
}

const parseJson = <A>(text: string, fallback: A): A => {
  try {
    return JSON.parse(text) as A
  } catch {
    return fallback
  }
}

const scopeOf = (s: string): MemoryScope => (s === "key" || s === "session" ? s : "global")

/** A new row's id: the prefix, then 16 hex digits. */
export const newId = (prefix: string) => `${prefix}_${crypto.randomBytes(8).toString("hex")}`

/** A compression combo row as the request path uses it. */
const comboOf = (r: ComboRow): CompressionCombo => ({
  id: r.id,
  name: r.name,
  description: r.description,
  steps: parseJson<Array<EngineStep>>(r.engines, []),
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at)
})
/** A memory row as an entry (its tokens counted). */
export const memoryOf = (r: MemoryRow): MemoryEntry => ({
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
/** A skill row as a skill (its trigger read leniently, its tokens counted). */
export const skillOf = (r: SkillRow): ContextSkill => {
  const t = parseJson<Partial<ContextSkill["trigger"]>>(r.trigger, {})
  return {
    id: r.id,
    name: r.name,
    source: r.source === "catalog" ? "catalog" : "custom",
    catalogId: r.catalog_id,
    text: r.text,
    trigger: {
      always: t.always === true,
      keywords: Array.isArray(t.keywords) ? t.keywords : [],
      models: Array.isArray(t.models) ? t.models : []
    },
    enabled: Number(r.enabled) === 1,
    tokens: countText(r.text),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at)
  }
}
/** A memory entry as the management API shows it. */
export const memoryView = (m: MemoryEntry): MemoryView => ({
  ...m,
  tags: [...m.tags],
  createdAt: toIso(m.createdAt)!,
  updatedAt: toIso(m.updatedAt)!
})
/** A skill as the management API shows it. */
export const skillView = (s: ContextSkill): ContextSkillView => ({
  ...s,
  trigger: { always: s.trigger.always, keywords: [...s.trigger.keywords], models: [...s.trigger.models] },
  createdAt: toIso(s.createdAt)!,
  updatedAt: toIso(s.updatedAt)!
})

/** The routing combos and models assigned to the compression combo `id`. */
export const assignmentsOf = (s: ContextSnapshot, id: string): CompressionAssignments => ({
  routingCombos: [...s.routingCombos].filter(([, c]) => c === id).map(([t]) => t),
  models: [...s.models].filter(([, c]) => c === id).map(([t]) => t)
})
/** A compression combo as the management API shows it, with its assignments. */
export const comboView = (s: ContextSnapshot, c: CompressionCombo): CompressionComboView => ({
  id: c.id,
  name: c.name,
  description: c.description,
  engines: c.steps,
  assignments: assignmentsOf(s, c.id),
  createdAt: toIso(c.createdAt)!,
  updatedAt: toIso(c.updatedAt)!
})

/** Reads the snapshot whole: every combo and assignment, the enabled memory entries and skills (oldest first). */
export const loadContextSnapshot = (sql: SqlClient.SqlClient): Effect.Effect<ContextSnapshot> =>
  Effect.gen(function* () {
    const combos = (yield* sql<ComboRow>`SELECT * FROM compression_combos ORDER BY created_at, id`).map(comboOf)
    const assignments = yield* sql<{
      kind: string
      target: string
      combo_id: string
    }>`SELECT kind, target, combo_id FROM compression_assignments ORDER BY kind, target`
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
