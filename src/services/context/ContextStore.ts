import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
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
import type { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import { makeCompressionCombos } from "./compressionCombos.js"
import { makeContextMemory } from "./contextMemory.js"
import { loadContextSnapshot } from "./contextRows.js"
import { makeContextSkills } from "./contextSkills.js"

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
  readonly updateCombo: (
    id: string,
    patch: UpdateCompressionCombo,
    actor: string
  ) => Effect.Effect<CompressionComboView, BadRequest | Conflict | NotFound>
  readonly removeCombo: (id: string, actor: string) => Effect.Effect<CompressionComboView, NotFound>
  readonly getAssignments: (id: string) => Effect.Effect<CompressionAssignments, NotFound>
  readonly setAssignments: (
    id: string,
    a: CompressionAssignments,
    actor: string
  ) => Effect.Effect<CompressionAssignments, NotFound | Conflict>
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
  readonly updateSkill: (
    id: string,
    patch: UpdateContextSkill,
    actor: string
  ) => Effect.Effect<ContextSkillView, BadRequest | Conflict | NotFound>
  readonly removeSkill: (id: string, actor: string) => Effect.Effect<ContextSkillView, NotFound>
}

/**
 * Compression combos, their assignments, memory entries and injected skills (docs/compression.md):
 * tables of migration 0018, read whole into a snapshot the request path peeks, reloaded when this
 * process writes or another process commits. The rows and the snapshot's load are in contextRows.ts;
 * the combos, the memory entries and the skills are each a module (compressionCombos.ts,
 * contextMemory.ts, contextSkills.ts).
 */
export class ContextStore extends Context.Tag("gateway/ContextStore")<ContextStore, ContextStoreShape>() {
  static readonly layer = Layer.effect(
    ContextStore,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const version = yield* StoreVersion
      const writer = yield* BatchWriter

      const cache = makeCachedLoad(version, loadContextSnapshot(sql))
      const audit = (actor: string, action: string, target: string) =>
        writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })
      const deps = { sql, snapshot: cache.get, invalidate: cache.invalidate, audit }

      return {
        snapshot: cache.get,
        peek: cache.peek,
        ...makeCompressionCombos(deps),
        ...makeContextMemory(deps),
        ...makeContextSkills(deps)
      } satisfies ContextStoreShape
    })
  )
}
