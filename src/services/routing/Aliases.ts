import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as SqlClient from "@effect/sql/SqlClient"
import { BadRequest, NotFound } from "../../domain/errors.js"
import type { ModelAliasView, SetModelAlias } from "../../domain/models.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { type Connection, connectionModelIds, Connections } from "../../upstream/providers/Connections.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"

/** Aliases live in `kv` (namespace `model_alias`: key the client id, value the target). */
export const ALIAS_NAMESPACE = "model_alias"
/** Longest alias chain followed (an alias may point at another alias). */
const MAX_DEPTH = 8

/**
 * `MODEL_ALIAS_COMPAT_ENABLED`: the model ids coding agents send by default (Claude Code, Codex
 * CLI, Gemini CLI), each with the families tried in order. When on, such an id that no connection
 * serves under that name goes to the first connected model (best priority first) whose id starts
 * with one of the families; an operator's own alias always wins. docs/operations.md.
 */
export const COMPAT_ALIASES: ReadonlyArray<{ readonly id: string; readonly client: string; readonly families: ReadonlyArray<string> }> = [
  { id: "claude-sonnet-4-5", client: "Claude Code", families: ["claude-sonnet-4-5", "claude-sonnet", "claude"] },
  { id: "claude-sonnet-4-5-20250929", client: "Claude Code", families: ["claude-sonnet-4-5", "claude-sonnet", "claude"] },
  { id: "claude-sonnet-4-20250514", client: "Claude Code", families: ["claude-sonnet-4", "claude-sonnet", "claude"] },
  { id: "claude-opus-4-1", client: "Claude Code", families: ["claude-opus-4-1", "claude-opus", "claude"] },
  { id: "claude-opus-4-1-20250805", client: "Claude Code", families: ["claude-opus-4-1", "claude-opus", "claude"] },
  { id: "claude-haiku-4-5", client: "Claude Code", families: ["claude-haiku-4-5", "claude-haiku", "claude-3-5-haiku", "claude"] },
  { id: "claude-haiku-4-5-20251001", client: "Claude Code", families: ["claude-haiku-4-5", "claude-haiku", "claude-3-5-haiku", "claude"] },
  { id: "claude-3-5-haiku-20241022", client: "Claude Code", families: ["claude-3-5-haiku", "claude-haiku", "claude"] },
  { id: "gpt-5-codex", client: "Codex CLI", families: ["gpt-5-codex", "gpt-5", "codex", "gpt-"] },
  { id: "gpt-5", client: "Codex CLI", families: ["gpt-5", "gpt-"] },
  { id: "codex-mini-latest", client: "Codex CLI", families: ["codex-mini", "gpt-5-mini", "gpt-"] },
  { id: "gemini-2.5-pro", client: "Gemini CLI", families: ["gemini-2.5-pro", "gemini-2", "gemini"] },
  { id: "gemini-2.5-flash", client: "Gemini CLI", families: ["gemini-2.5-flash", "gemini-2", "gemini"] },
  { id: "gemini-2.5-flash-lite", client: "Gemini CLI", families: ["gemini-2.5-flash-lite", "gemini-2.5-flash", "gemini"] }
]
const COMPAT = new Map(COMPAT_ALIASES.map((c) => [c.id, c.families]))

export interface AliasesShape {
  /** Explicit aliases and, with the flag on, the compat ones that resolve now. */
  readonly list: Effect.Effect<{ readonly aliases: ReadonlyArray<ModelAliasView>; readonly compat: boolean }>
  readonly set: (input: SetModelAlias, actor: string) => Effect.Effect<ModelAliasView, BadRequest>
  readonly remove: (alias: string, actor: string) => Effect.Effect<ModelAliasView, NotFound>
  /** What `model` routes to: its alias chain followed, or `model` itself. */
  readonly resolve: (model: string) => Effect.Effect<string>
  /** `resolve` from memory when the aliases and flags are known fresh, else undefined (use `resolve`). */
  readonly peekResolve: (model: string) => string | undefined
}

/** The first connected model of one of `families`, as `<connection>/<model>`. */
const compatTarget = (families: ReadonlyArray<string>, connections: ReadonlyArray<Connection>): string | undefined => {
  const enabled = connections.filter((c) => c.enabled).sort((a, b) => a.priority - b.priority || a.createdAt - b.createdAt)
  for (const family of families) {
    for (const c of enabled) {
      const m = connectionModelIds(c).find((id) => id.startsWith(family))
      if (m) return `${c.name}/${m}`
    }
  }
  return undefined
}

/**
 * Model aliases (`/api/models/alias`): a client-facing id routed as another model id or combo.
 * The router reads them first on every inference route (`peekResolve` is a Map read).
 */
export class Aliases extends Context.Tag("gateway/Aliases")<Aliases, AliasesShape>() {
  static readonly layer = Layer.effect(
    Aliases,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const sql = yield* SqlClient.SqlClient
      const version = yield* StoreVersion
      const flags = yield* FeatureFlags
      const connections = yield* Connections
      const writer = yield* BatchWriter

      const snapshot = makeCachedLoad(
        version,
        Effect.map(
          sql<{ key: string; value: string }>`SELECT key, value FROM kv WHERE namespace = ${ALIAS_NAMESPACE} ORDER BY key`.pipe(
            Effect.orDie
          ),
          (rows) => new Map(rows.map((r) => [r.key, r.value])) as ReadonlyMap<string, string>
        )
      )

      /** Follows explicit aliases; undefined when the chain loops (never stored, but another process may write). */
      const follow = (map: ReadonlyMap<string, string>, model: string): string => {
        let current = model
        for (let i = 0; i < MAX_DEPTH; i++) {
          const next = map.get(current)
          if (next === undefined) return current
          current = next
        }
        return current
      }

      /** The compat target of `model`, when `model` is a compat id no connection serves by that name. */
      const compatOf = (model: string, all: ReadonlyArray<Connection>, served: boolean): string | undefined => {
        const families = COMPAT.get(model)
        if (!families || served) return undefined
        return compatTarget(families, all)
      }

      const peekResolve: AliasesShape["peekResolve"] = (model) => {
        const map = snapshot.peek()
        if (map === undefined) return undefined
        if (map.size > 0 && map.has(model)) return follow(map, model)
        if (!COMPAT.has(model)) return model
        const on = flags.peekEnabled("MODEL_ALIAS_COMPAT_ENABLED")
        if (on === undefined) return undefined
        if (!on) return model
        const all = connections.peekList()
        const targets = connections.peekTargets(model)
        if (all === undefined || targets === undefined) return undefined
        return compatOf(model, all, Either.isRight(targets)) ?? model
      }

      const resolve: AliasesShape["resolve"] = (model) =>
        Effect.gen(function* () {
          const map = yield* snapshot.get
          if (map.has(model)) return follow(map, model)
          if (!COMPAT.has(model) || !(yield* flags.enabled("MODEL_ALIAS_COMPAT_ENABLED"))) return model
          const all = yield* connections.list
          const served = Either.isRight(yield* Effect.either(connections.targets(model)))
          return compatOf(model, all, served) ?? model
        })

      const list: AliasesShape["list"] = Effect.gen(function* () {
        const map = yield* snapshot.get
        const out: Array<ModelAliasView> = Array.from(map, ([alias, target]) => ({ alias, target, source: "user" as const }))
        const compat = yield* flags.enabled("MODEL_ALIAS_COMPAT_ENABLED")
        if (compat) {
          const all = yield* connections.list
          for (const { id } of COMPAT_ALIASES) {
            if (map.has(id)) continue
            const served = Either.isRight(yield* Effect.either(connections.targets(id)))
            const target = compatOf(id, all, served)
            if (target) out.push({ alias: id, target, source: "compat" })
          }
        }
        return { aliases: out, compat }
      })

      const audit = (actor: string, action: string, target: string) =>
        writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })

      const set: AliasesShape["set"] = (input, actor) =>
        Effect.gen(function* () {
          const { alias, target } = input
          if (alias === target) return yield* new BadRequest({ message: `target: alias '${alias}' cannot point at itself` })
          const map = new Map(yield* snapshot.get)
          map.set(alias, target)
          // Follow the chain from the new alias: coming back to it is a loop.
          let current = target
          const seen = [alias]
          for (let i = 0; i <= map.size; i++) {
            if (current === alias)
              return yield* new BadRequest({ message: `target: '${alias}' would loop (${[...seen, alias].join(" → ")})` })
            const next = map.get(current)
            if (next === undefined) break
            seen.push(current)
            current = next
          }
          if (seen.length > MAX_DEPTH)
            return yield* new BadRequest({ message: `target: the alias chain from '${alias}' is longer than ${MAX_DEPTH}` })
          yield* kv.set(ALIAS_NAMESPACE, alias, target)
          yield* snapshot.invalidate
          audit(actor, "model_alias.set", alias)
          return { alias, target, source: "user" as const }
        })

      const remove: AliasesShape["remove"] = (alias, actor) =>
        Effect.gen(function* () {
          const map = yield* snapshot.get
          const target = map.get(alias)
          if (target === undefined || !(yield* kv.remove(ALIAS_NAMESPACE, alias))) {
            return yield* new NotFound({ message: `no model alias '${alias}'` })
          }
          yield* snapshot.invalidate
          audit(actor, "model_alias.remove", alias)
          return { alias, target, source: "user" as const }
        })

      return { list, set, remove, resolve, peekResolve }
    })
  )
}
