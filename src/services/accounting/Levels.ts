import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type LevelLimitsView, type SetLevelLimits, decodeSetLevelLimits, type SubjectRef, subjectRef } from "../../domain/accounting.js"
import { BadRequest, NotFound } from "../../domain/errors.js"
import { type Level, levelOf, ORGANISATION_ID } from "../../domain/teams.js"
import { makeVersionedReload, StoreVersion } from "../../platform/store/StoreVersion.js"
import { toIso } from "../../platform/store/Db.js"
import { ApiKeys } from "../auth/ApiKeys.js"
import { ancestorsOf, labelOf, loadOwners, nameOf, NO_OWNERS, type Owners } from "./levelOwners.js"
import { coversMcp, coversModel, modelAllowed, type ModelPattern, compileModels } from "./levelPatterns.js"

const NONE: ReadonlyArray<never> = []

/** A level's own limits besides budgets and token limits (`level_limits`; a key's rpm, tpm and MCP are on the key). */
export interface LevelSettings {
  readonly rpm: number | null
  readonly tpm: number | null
  readonly models: ReadonlyArray<string> | null
  readonly mcp: ReadonlyArray<string> | null
  readonly createdAt: number
  readonly updatedAt: number
  /** `models` compiled once. */
  readonly compiled: ReadonlyArray<ModelPattern> | null
}

/** The level that refused a request, as an answer names it. */
export interface LevelRefusal {
  readonly level: Level
  readonly subjectId: string
  /** `team 'research' (team_ab12)`. */
  readonly label: string
}

export interface ModelRefusal extends LevelRefusal {
  readonly models: ReadonlyArray<string>
}

/** A level's rate limits above a key, for the inbound limits. */
export interface LevelRates extends LevelRefusal {
  readonly rpm: number | null
  readonly tpm: number | null
}

export interface LevelsShape {
  /** The subjects above a key whose limits bind its requests, nearest first, the organisation last (synchronous, from memory). */
  readonly above: (apiKeyId: string) => ReadonlyArray<string>
  /** The subjects above any subject (a team: the organisation; a user: their teams and the organisation; a key: as `above`). */
  readonly ancestors: (subjectId: string) => ReadonlyArray<string>
  /** `team 'research' (team_ab12)`, `the organisation`, ... */
  readonly label: (subjectId: string) => string
  readonly name: (subjectId: string) => string
  /** The subject a body names: its id once it is known (a team by id or name, a user by id or email); 404 when unknown. */
  readonly resolve: (ref: SubjectRef | string) => Effect.Effect<string, BadRequest | NotFound>
  /** A level's rate limits, models and MCP access (not a key's rpm, tpm, MCP: those are the key's). */
  readonly settings: (subjectId: string) => LevelSettings | undefined
  /** The first level (the key, then those above it) whose models do not include the request's; undefined when every level allows it. */
  readonly modelRefusal: (
    apiKeyId: string,
    requested: string,
    candidates: () => ReadonlyArray<{ readonly model: string; readonly key: string; readonly provider: string }>
  ) => ModelRefusal | undefined
  /** Whether some level has models: else `modelRefusal` is never needed. */
  readonly anyModels: () => boolean
  /** The rate limits set above a key (nearest first); [] when none. */
  readonly ratesAbove: (apiKeyId: string) => ReadonlyArray<LevelRates>
  /** The MCP ceilings set above a key (nearest first). */
  readonly mcpAbove: (apiKeyId: string) => ReadonlyArray<LevelRefusal & { readonly allow: ReadonlyArray<string> }>
  /**
   * Why a key's own rpm or tpm may not be `value` (`POST` and `PATCH /api/keys`): the nearest level
   * above a key of this owner (its user, its team or the user's teams, the organisation) with a
   * lower one; undefined when it is within every level, as `set` requires of the levels' own.
   */
  readonly keyRateCeiling: (
    owner: { readonly userId: string | null; readonly teamId: string | null },
    field: "rpm" | "tpm",
    value: number
  ) => Effect.Effect<string | undefined>
  /** `POST /api/usage/limits`: the fields given change (null removes one), within every level above. */
  readonly set: (input: unknown) => Effect.Effect<LevelLimitsView, BadRequest | NotFound>
  /** `DELETE /api/usage/limits/{subject}`: the level's rate limits, models and MCP access removed (a key's own rpm, tpm and MCP too). */
  readonly remove: (subjectId: string) => Effect.Effect<LevelLimitsView, NotFound>
  /** One subject's limits, or every subject's with any (of `level`, or all). */
  readonly list: (filter: { readonly subjectId?: string; readonly level?: Level | "all" }) => Effect.Effect<ReadonlyArray<LevelLimitsView>>
  /** Reads the owners and the levels' limits again when another process (or a change here) moved the change counter. */
  readonly refresh: Effect.Effect<void>
  /** Reads them again now (before a management change that names a subject). */
  readonly reload: Effect.Effect<void>
}

interface Row {
  readonly subject_id: string
  readonly rpm: number | null
  readonly tpm: number | null
  readonly models: string | null
  readonly mcp_allow: string | null
  readonly created_at: number
  readonly updated_at: number
}

const parseList = (text: string | null): ReadonlyArray<string> | null => {
  if (text === null || text === "") return null
  try {
    const v = JSON.parse(text) as unknown
    return Array.isArray(v) ? v.filter((s): s is string => typeof s === "string") : null
  } catch {
    return null
  }
}

const settingsOf = (row: Row): LevelSettings => {
  const models = parseList(row.models)
  return {
    rpm: row.rpm === null ? null : Number(row.rpm),
    tpm: row.tpm === null ? null : Number(row.tpm),
    models,
    mcp: parseList(row.mcp_allow),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    compiled: models === null ? null : compileModels(models)
  }
}

/**
 * The levels above a key (docs/accounting.md, "Limits at every level"): who owns each key and which
 * teams each user is in, and each level's rate limits, allowed models and MCP access. Budgets and
 * token limits of every level are kept by `Budgets` and `TokenLimits`, which ask `above` which
 * subjects a key's request counts toward. Everything the request path asks is answered from memory.
 */
export class Levels extends Context.Tag("gateway/Levels")<Levels, LevelsShape>() {
  static readonly layer = Layer.effect(
    Levels,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const version = yield* Effect.serviceOption(StoreVersion)
      const keys = yield* Effect.serviceOption(ApiKeys)
      let owners: Owners = NO_OWNERS
      let settings = new Map<string, LevelSettings>()
      let aboveCache = new Map<string, ReadonlyArray<string>>()
      let withModels = 0
      let withRates = 0

      const load = Effect.gen(function* () {
        const nextOwners = yield* loadOwners(sql)
        const rows = yield* Effect.orElseSucceed(sql<Row>`SELECT * FROM level_limits`, (): ReadonlyArray<Row> => [])
        owners = nextOwners
        settings = new Map(rows.map((r) => [r.subject_id, settingsOf(r)]))
        withModels = rows.filter((r) => r.models !== null).length
        withRates = rows.filter((r) => r.rpm !== null || r.tpm !== null).length
        aboveCache = new Map()
      })
      const refresh = yield* makeVersionedReload(version, load)

      const above = (apiKeyId: string) => {
        const cached = aboveCache.get(apiKeyId)
        if (cached !== undefined) return cached
        const list = ancestorsOf(owners, apiKeyId)
        aboveCache.set(apiKeyId, list)
        return list
      }
      const label = (id: string) => labelOf(owners, id)
      const refusalOf = (id: string): LevelRefusal => ({ level: levelOf(id), subjectId: id, label: label(id) })

      const resolve = (ref: SubjectRef | string): Effect.Effect<string, BadRequest | NotFound> =>
        Effect.suspend((): Effect.Effect<string, BadRequest | NotFound> => {
          if (typeof ref === "string") return Effect.fail(new BadRequest({ message: ref }))
          switch (ref.level) {
            case "organisation":
              return Effect.succeed(ORGANISATION_ID)
            case "key":
              return owners.keys.has(ref.ref)
                ? Effect.succeed(ref.ref)
                : Effect.fail(new NotFound({ message: `no API key with id '${ref.ref}'` }))
            case "team": {
              const id = owners.teams.has(ref.ref) ? ref.ref : owners.teamsByName.get(ref.ref.toLowerCase())
              return id !== undefined ? Effect.succeed(id) : Effect.fail(new NotFound({ message: `no team with id or name '${ref.ref}'` }))
            }
            case "user": {
              const id = owners.users.has(ref.ref) ? ref.ref : owners.usersByEmail.get(ref.ref.toLowerCase())
              return id !== undefined ? Effect.succeed(id) : Effect.fail(new NotFound({ message: `no user with id or email '${ref.ref}'` }))
            }
          }
        })

      const modelRefusal: LevelsShape["modelRefusal"] = (apiKeyId, requested, candidates) => {
        if (withModels === 0) return undefined
        const check = (id: string): ModelRefusal | undefined => {
          const s = settings.get(id)
          if (s?.compiled == null || modelAllowed(s.compiled, requested, candidates)) return undefined
          return { ...refusalOf(id), models: s.models! }
        }
        const own = check(apiKeyId)
        if (own) return own
        for (const id of above(apiKeyId)) {
          const refused = check(id)
          if (refused) return refused
        }
        return undefined
      }

      // Every request asks (the inbound limits' admission): nothing allocated while no level has a rate limit.
      const ratesAbove = (apiKeyId: string): ReadonlyArray<LevelRates> => {
        if (withRates === 0) return NONE
        let out: Array<LevelRates> | undefined
        for (const id of above(apiKeyId)) {
          const s = settings.get(id)
          if (s && (s.rpm !== null || s.tpm !== null)) (out ??= []).push({ ...refusalOf(id), rpm: s.rpm, tpm: s.tpm })
        }
        return out ?? NONE
      }

      const mcpAbove = (apiKeyId: string): ReadonlyArray<LevelRefusal & { readonly allow: ReadonlyArray<string> }> => {
        if (settings.size === 0) return NONE
        const out: Array<LevelRefusal & { readonly allow: ReadonlyArray<string> }> = []
        for (const id of above(apiKeyId)) {
          const s = settings.get(id)
          if (s?.mcp != null) out.push({ ...refusalOf(id), allow: s.mcp })
        }
        return out
      }

      /** A key's rpm, tpm and MCP are its own columns; every other level's are here. */
      const effective = (id: string) =>
        Effect.gen(function* () {
          const s = settings.get(id)
          if (levelOf(id) !== "key") return { rpm: s?.rpm ?? null, tpm: s?.tpm ?? null, models: s?.models ?? null, mcp: s?.mcp ?? null }
          const rec = keys._tag === "Some" ? yield* keys.value.byId(id) : undefined
          return { rpm: rec?.rpm ?? null, tpm: rec?.tpm ?? null, models: s?.models ?? null, mcp: rec?.mcpAllow ?? null }
        })

      const viewOf = (id: string) =>
        Effect.map(
          effective(id),
          (e): LevelLimitsView => ({
            subjectId: id,
            level: levelOf(id),
            name: nameOf(owners, id),
            rpm: e.rpm,
            tpm: e.tpm,
            models: e.models === null ? null : [...e.models],
            mcp: e.mcp === null ? null : { allow: [...e.mcp] },
            above: (levelOf(id) === "key" ? above(id) : ancestorsOf(owners, id)).map((a) => ({
              subjectId: a,
              level: levelOf(a),
              name: nameOf(owners, a)
            })),
            updatedAt: toIso(settings.get(id)?.updatedAt ?? null)
          })
        )

      /** Why `value` of `field` may not be set below `ancestors` (nearest first): the nearest with a lower value. */
      const ceilingAmong = (ancestors: ReadonlyArray<string>, field: "rpm" | "tpm", value: number): Effect.Effect<string | undefined> =>
        Effect.gen(function* () {
          for (const a of ancestors) {
            const limit = (yield* effective(a))[field]
            if (limit !== null && value > limit) return `${field} ${value} is above ${label(a)}'s ${limit}`
          }
          return undefined
        })

      /** Why `value` of `field` may not be set on `id`: the nearest level above with a lower value. */
      const ceiling = (id: string, field: "rpm" | "tpm", value: number) => ceilingAmong(ancestorsOf(owners, id), field, value)

      /** The levels above a key of this owner, nearest first (as `ancestorsOf` reads them for a key that exists). */
      const aboveOwner = (owner: { readonly userId: string | null; readonly teamId: string | null }): ReadonlyArray<string> => {
        const out: Array<string> = []
        if (owner.userId !== null) out.push(owner.userId)
        if (owner.teamId !== null) out.push(owner.teamId)
        else if (owner.userId !== null) out.push(...(owners.users.get(owner.userId)?.teams ?? []))
        out.push(ORGANISATION_ID)
        return out
      }

      const keyRateCeiling: LevelsShape["keyRateCeiling"] = (owner, field, value) =>
        Effect.zipRight(
          load,
          Effect.suspend(() => ceilingAmong(aboveOwner(owner), field, value))
        )

      const listCeiling = (id: string, field: "models" | "mcp", patterns: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          for (const a of ancestorsOf(owners, id)) {
            const limit = (yield* effective(a))[field]
            if (limit === null) continue
            const outside = patterns.filter((p) => !limit.some((l) => (field === "models" ? coversModel(l, p) : coversMcp(l, p))))
            if (outside.length > 0)
              return `${field} ${outside.map((p) => `'${p}'`).join(", ")} ${outside.length === 1 ? "is" : "are"} not within ${label(a)}'s ${field} (${limit.join(", ")})`
          }
          return undefined
        })

      const set = (input: unknown) =>
        Effect.gen(function* () {
          const body: SetLevelLimits = yield* decodeSetLevelLimits(input)
          yield* load
          const id = yield* resolve(subjectRef(body))
          for (const field of ["rpm", "tpm"] as const) {
            const v = body[field]
            if (typeof v === "number") {
              const why = yield* ceiling(id, field, v)
              if (why) return yield* new BadRequest({ message: why })
            }
          }
          if (body.models) {
            const why = yield* listCeiling(id, "models", body.models)
            if (why) return yield* new BadRequest({ message: why })
          }
          if (body.mcp) {
            const why = yield* listCeiling(id, "mcp", body.mcp.allow)
            if (why) return yield* new BadRequest({ message: why })
          }
          const now = yield* Clock.currentTimeMillis
          const current = settings.get(id)
          const isKey = levelOf(id) === "key"
          if (isKey && (body.rpm !== undefined || body.tpm !== undefined || body.mcp !== undefined) && keys._tag === "Some") {
            yield* Effect.orDie(
              keys.value.update(id, {
                ...(body.rpm !== undefined ? { rpm: body.rpm } : {}),
                ...(body.tpm !== undefined ? { tpm: body.tpm } : {}),
                ...(body.mcp !== undefined ? { mcp: body.mcp } : {})
              })
            )
          }
          const pick = <A>(given: A | undefined, kept: A | null | undefined): A | null => (given !== undefined ? given : (kept ?? null))
          const row = {
            subject_id: id,
            rpm: isKey ? null : pick(body.rpm, current?.rpm),
            tpm: isKey ? null : pick(body.tpm, current?.tpm),
            models: (() => {
              const m = pick(body.models, current?.models)
              return m === null ? null : JSON.stringify(m)
            })(),
            mcp_allow: (() => {
              const m = isKey ? null : body.mcp !== undefined ? (body.mcp?.allow ?? null) : (current?.mcp ?? null)
              return m === null ? null : JSON.stringify(m)
            })(),
            created_at: current?.createdAt ?? now,
            updated_at: now
          }
          if (row.rpm === null && row.tpm === null && row.models === null && row.mcp_allow === null)
            yield* Effect.orDie(sql`DELETE FROM level_limits WHERE subject_id = ${id}`)
          else
            yield* Effect.orDie(sql`INSERT INTO level_limits ${sql.insert(row)} ON CONFLICT (subject_id) DO UPDATE SET
              rpm = excluded.rpm, tpm = excluded.tpm, models = excluded.models, mcp_allow = excluded.mcp_allow,
              updated_at = excluded.updated_at`)
          yield* load
          return yield* viewOf(id)
        })

      const remove = (subjectId: string) =>
        Effect.gen(function* () {
          yield* load
          const known =
            subjectId === ORGANISATION_ID || owners.keys.has(subjectId) || owners.teams.has(subjectId) || owners.users.has(subjectId)
          if (!known && !settings.has(subjectId))
            return yield* new NotFound({ message: `no key, team, user or organisation '${subjectId}'` })
          const before = yield* viewOf(subjectId)
          if (levelOf(subjectId) === "key" && keys._tag === "Some" && owners.keys.has(subjectId))
            yield* Effect.orDie(keys.value.update(subjectId, { rpm: null, tpm: null, mcp: null }))
          yield* Effect.orDie(sql`DELETE FROM level_limits WHERE subject_id = ${subjectId}`)
          yield* load
          return before
        })

      const list: LevelsShape["list"] = (filter) =>
        Effect.gen(function* () {
          yield* refresh
          if (filter.subjectId !== undefined) return [yield* viewOf(filter.subjectId)]
          const ids = [...settings.keys()].filter(
            (id) => filter.level === undefined || filter.level === "all" || levelOf(id) === filter.level
          )
          ids.sort()
          const out: Array<LevelLimitsView> = []
          for (const id of ids) out.push(yield* viewOf(id))
          return out
        })

      return {
        above,
        ancestors: (id) => (levelOf(id) === "key" ? above(id) : ancestorsOf(owners, id)),
        label,
        name: (id) => nameOf(owners, id),
        resolve,
        settings: (id) => settings.get(id),
        modelRefusal,
        anyModels: () => withModels > 0,
        ratesAbove,
        mcpAbove,
        keyRateCeiling,
        set,
        remove,
        list,
        refresh,
        reload: load
      } satisfies LevelsShape
    })
  )
}
