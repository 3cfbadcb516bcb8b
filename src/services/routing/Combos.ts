import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as crypto from "node:crypto"
import { type ComboConfig, type ComboTarget, type ComboView, type CreateCombo, UpdateCombo } from "../../domain/combos.js"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import { decodeOrBadRequest } from "../../domain/parse.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { toIso } from "../../platform/store/Db.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import { modeName } from "./auto/weights.js"
import { AutoEngine } from "./AutoEngine.js"
import type { StrategyName } from "./types.js"

export interface Combo {
  readonly id: string
  readonly name: string
  readonly strategy: StrategyName
  readonly targets: ReadonlyArray<ComboTarget>
  readonly config: ComboConfig
  readonly description: string | null
  readonly enabled: boolean
  readonly createdAt: number
  readonly updatedAt: number
}

/** Checks that need more than the schema (registered router strategies). Returns a problem or undefined. */
export type ComboCheck = (combo: Pick<Combo, "strategy" | "targets" | "config">) => string | undefined

export interface CombosShape {
  readonly list: Effect.Effect<ReadonlyArray<Combo>>
  readonly get: (idOrName: string) => Effect.Effect<Combo, NotFound>
  /** An enabled combo by name (case-insensitive), from memory: the hot path's lookup. */
  readonly byName: (name: string) => Effect.Effect<Combo | undefined>
  /** `byName` from memory when the cached combos are known fresh: the combo or null; undefined when not known (use `byName`). */
  readonly peekByName: (name: string) => Combo | null | undefined
  /** Every combo from memory when the cached combos are known fresh (the same array until one changes); undefined when not known. */
  readonly peekAll: () => ReadonlyArray<Combo> | undefined
  readonly create: (input: CreateCombo, actor?: string) => Effect.Effect<Combo, BadRequest | Conflict>
  readonly update: (idOrName: string, patch: UpdateCombo, actor?: string) => Effect.Effect<Combo, BadRequest | NotFound | Conflict>
  readonly remove: (idOrName: string, actor?: string) => Effect.Effect<Combo, NotFound>
}

interface Row {
  readonly id: string
  readonly name: string
  readonly strategy: string
  readonly targets: string
  readonly config: string
  readonly description: string | null
  readonly enabled: number
  readonly created_at: number
  readonly updated_at: number
}

export const comboView = (c: Combo): ComboView => ({
  id: c.id,
  name: c.name,
  strategy: c.strategy,
  targets: c.targets.map((t) => ({ ...t })),
  config: { ...c.config },
  bridge: c.config.bridge ?? null,
  description: c.description,
  enabled: c.enabled,
  createdAt: toIso(c.createdAt)!,
  updatedAt: toIso(c.updatedAt)!
})

/** The top-level `bridge` of a create or update, kept in the config (null removes it; absent leaves the config's). */
const withBridge = (config: ComboConfig, bridge: ComboConfig["bridge"] | null | undefined): ComboConfig => {
  if (bridge === undefined) return config
  const { bridge: _old, ...rest } = config
  return bridge === null ? rest : { ...rest, bridge }
}

/** Rules of a combo as a whole (the schema checks each field). */
export const comboProblems = (c: Pick<Combo, "strategy" | "targets" | "config">): Array<string> => {
  const out: Array<string> = []
  if (c.strategy !== "auto" && c.targets.length === 0)
    out.push(
      `strategy ${c.strategy} needs at least one target (only auto may leave targets empty: then every connected model is a candidate)`
    )
  if (c.strategy !== "fusion" && (c.config.judgeModel !== undefined || c.config.fusionTuning !== undefined)) {
    out.push("judgeModel and fusionTuning apply to strategy fusion only")
  }
  const sla = c.config.slaTargetP95Ms ?? c.config.slaMaxErrorRate ?? c.config.slaMaxCostPer1MTokens ?? c.config.slaHardConstraints
  const router = c.config.routerStrategy ?? c.config.auto?.routerStrategy
  if (sla !== undefined && c.strategy !== "auto") out.push("sla* settings apply to strategy auto (with routerStrategy sla-aware) only")
  if (
    c.strategy !== "auto" &&
    (router !== undefined ||
      c.config.auto !== undefined ||
      c.config.modePack !== undefined ||
      c.config.budgetCap !== undefined ||
      c.config.explorationRate !== undefined)
  ) {
    out.push("routerStrategy, auto, modePack, budgetCap and explorationRate apply to strategy auto only")
  }
  return out
}

/**
 * Makes `target` the combo's primary (first) target: moved to the front when the combo has it
 * (its weight replaced when one is given), added in front when it does not. `gateway combo
 * switch` and the MCP tool both switch through this.
 */
export const switchPrimary = (
  combos: CombosShape,
  idOrName: string,
  target: { readonly model: string; readonly weight?: number | undefined },
  actor: string
): Effect.Effect<{ readonly combo: Combo; readonly primary: ComboTarget; readonly added: boolean }, BadRequest | NotFound | Conflict> =>
  Effect.gen(function* () {
    const combo = yield* combos.get(idOrName)
    const existing = combo.targets.find((t) => t.model === target.model)
    const first = existing
      ? { ...existing, ...(target.weight !== undefined ? { weight: target.weight } : {}) }
      : { model: target.model, ...(target.weight !== undefined ? { weight: target.weight } : {}) }
    const patch = yield* decodeOrBadRequest(UpdateCombo)({ targets: [first, ...combo.targets.filter((t) => t.model !== target.model)] })
    const updated = yield* combos.update(combo.id, patch, actor)
    return { combo: updated, primary: updated.targets[0] ?? first, added: !existing }
  })

const nameTaken =
  (name: string) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, Conflict, R> =>
    Effect.catchAll(effect, (e) =>
      isUniqueViolation(e)
        ? Effect.fail(new Conflict({ message: `a combo named '${name}' (or with that id) already exists` }))
        : Effect.die(e)
    )

/**
 * Persisted routing combos. Reads come from an in-memory snapshot rebuilt when this process
 * writes or another process (the CLI) commits, so the request path does no query.
 */
export class Combos extends Context.Tag("gateway/Combos")<Combos, CombosShape>() {
  static readonly layer = Layer.effect(
    Combos,
    Effect.gen(function* () {
      const engine = yield* AutoEngine
      const check: ComboCheck = (c) => {
        const name = c.config.routerStrategy ?? c.config.auto?.routerStrategy
        if (name !== undefined && !engine.registry.has(name)) {
          return `routerStrategy '${name}' is not registered; known: ${engine.registry
            .list()
            .flatMap((l) => [l.name, ...l.aliases])
            .join(", ")}`
        }
        if (c.config.modePack !== undefined && modeName(c.config.modePack) === undefined) {
          return `modePack '${c.config.modePack}' is unknown; use ship-fast, cost-saver, quality-first, offline-friendly, reliability-first or balanced`
        }
        return undefined
      }
      const sql = yield* SqlClient.SqlClient
      const version = yield* StoreVersion
      const writer = yield* BatchWriter

      const fromRow = (row: Row): Combo => ({
        id: row.id,
        name: row.name,
        strategy: row.strategy as StrategyName,
        targets: JSON.parse(row.targets) as Array<ComboTarget>,
        config: JSON.parse(row.config) as ComboConfig,
        description: row.description,
        enabled: row.enabled === 1,
        createdAt: row.created_at,
        updatedAt: row.updated_at
      })

      const snapshot = makeCachedLoad(
        version,
        Effect.map(sql<Row>`SELECT * FROM combos ORDER BY lower(name)`.pipe(Effect.orDie), (rows) => {
          const all = rows.map(fromRow)
          return { all, byName: new Map(all.map((c) => [c.name.toLowerCase(), c])) }
        })
      )

      const find = (s: { all: ReadonlyArray<Combo>; byName: ReadonlyMap<string, Combo> }, idOrName: string) =>
        s.all.find((c) => c.id === idOrName) ?? s.byName.get(idOrName.toLowerCase())

      const enabledNamed = (s: { byName: ReadonlyMap<string, Combo> }, name: string) => {
        const c = s.byName.get(name.toLowerCase())
        return c?.enabled ? c : undefined
      }

      const get = (idOrName: string) =>
        Effect.flatMap(snapshot.get, (s) => {
          const c = find(s, idOrName)
          return c ? Effect.succeed(c) : Effect.fail(new NotFound({ message: `no combo with id or name '${idOrName}'` }))
        })

      const validate = (c: Pick<Combo, "strategy" | "targets" | "config">) => {
        const problems = comboProblems(c)
        const extra = check(c)
        if (extra) problems.push(extra)
        return problems.length > 0 ? Effect.fail(new BadRequest({ message: problems.join("; ") })) : Effect.void
      }

      const audit = (actor: string, action: string, target: string) =>
        writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })

      const create: CombosShape["create"] = (input, actor = "system") =>
        Effect.gen(function* () {
          const combo = { strategy: input.strategy, targets: input.targets ?? [], config: withBridge(input.config ?? {}, input.bridge) }
          yield* validate(combo)
          const s = yield* snapshot.get
          const clash = s.byName.get(input.name.toLowerCase()) ?? s.all.find((c) => c.id.toLowerCase() === input.name.toLowerCase())
          if (clash)
            return yield* new Conflict({ message: `'${input.name}' is already the name or id of combo ${clash.name} (${clash.id})` })
          const id = input.id ?? "combo_" + crypto.randomBytes(6).toString("hex")
          // Lookups take an id or a name: an id may not be another combo's name (or id).
          const idClash = s.all.find((c) => c.id.toLowerCase() === id.toLowerCase() || c.name.toLowerCase() === id.toLowerCase())
          if (idClash)
            return yield* new Conflict({ message: `id '${id}' is already the name or id of combo ${idClash.name} (${idClash.id})` })
          const t = Date.now()
          yield* sql`INSERT INTO combos ${sql.insert({
            id,
            name: input.name,
            strategy: combo.strategy,
            targets: JSON.stringify(combo.targets),
            config: JSON.stringify(combo.config),
            description: input.description ?? null,
            enabled: input.enabled === false ? 0 : 1,
            created_at: t,
            updated_at: t
          })}`.pipe(nameTaken(input.name))
          yield* snapshot.invalidate
          audit(actor, "combo.create", id)
          return yield* get(id).pipe(Effect.orDie)
        })

      const update: CombosShape["update"] = (idOrName, patch, actor = "system") =>
        Effect.gen(function* () {
          const current = yield* get(idOrName)
          const next = {
            strategy: patch.strategy ?? current.strategy,
            targets: patch.targets ?? current.targets,
            config: withBridge(patch.config ?? current.config, patch.bridge)
          }
          yield* validate(next)
          if (patch.name !== undefined) {
            const s = yield* snapshot.get
            const clash = s.byName.get(patch.name.toLowerCase()) ?? s.all.find((c) => c.id.toLowerCase() === patch.name!.toLowerCase())
            if (clash && clash.id !== current.id)
              return yield* new Conflict({ message: `'${patch.name}' is already the name or id of combo ${clash.name} (${clash.id})` })
          }
          const fields: Record<string, string | number | null> = {
            updated_at: Date.now(),
            strategy: next.strategy,
            targets: JSON.stringify(next.targets),
            config: JSON.stringify(next.config)
          }
          if (patch.name !== undefined) fields["name"] = patch.name
          if (patch.description !== undefined) fields["description"] = patch.description
          if (patch.enabled !== undefined) fields["enabled"] = patch.enabled ? 1 : 0
          yield* sql`UPDATE combos SET ${sql.update(fields)} WHERE id = ${current.id}`.pipe(nameTaken(patch.name ?? current.name))
          yield* snapshot.invalidate
          audit(actor, "combo.update", current.id)
          return yield* get(current.id).pipe(Effect.orDie)
        })

      const remove: CombosShape["remove"] = (idOrName, actor = "system") =>
        Effect.gen(function* () {
          const current = yield* get(idOrName)
          yield* sql`DELETE FROM combos WHERE id = ${current.id}`.pipe(Effect.orDie)
          yield* snapshot.invalidate
          audit(actor, "combo.remove", current.id)
          return current
        })

      return {
        list: Effect.map(snapshot.get, (s) => s.all),
        get,
        byName: (name) => Effect.map(snapshot.get, (s) => enabledNamed(s, name)),
        peekAll: () => snapshot.peek()?.all,
        peekByName: (name) => {
          const s = snapshot.peek()
          return s === undefined ? undefined : (enabledNamed(s, name) ?? null)
        },
        create,
        update,
        remove
      }
    })
  )
}
