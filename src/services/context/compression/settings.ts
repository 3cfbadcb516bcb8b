import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as path from "node:path"
import { describeParseError } from "../../../domain/parse.js"
import { BadRequest } from "../../../domain/errors.js"
import type { FeatureFlagsShape } from "../../../platform/flags/FeatureFlags.js"
import type { KeyValueShape } from "../../../platform/store/KeyValue.js"
import { ENGINES, type EngineEntry, rtk } from "../engines/index.js"
import { type SummarizeConfig as SummarizeSettings, SummarizeConfig } from "../summarize.js"
import type { EngineId } from "../types.js"

const CONFIG_NAMESPACE = "compression.engines"

/** rtk's filters as the API lists them: built-in, configured and the project files'. */
export interface RtkFilters {
  readonly filters: ReadonlyArray<{
    readonly id: string
    readonly description: string
    readonly source: "builtin" | "custom" | "project"
    readonly enabled: boolean
    readonly match: unknown
  }>
  readonly project: {
    readonly dir: string
    readonly trusted: boolean
    readonly files: ReadonlyArray<{ readonly file: string; readonly filters: number; readonly errors: ReadonlyArray<string> }>
  }
}

interface ProjectFilters {
  readonly key: string
  readonly filters: ReadonlyArray<rtk.FilterSpec>
  readonly files: RtkFilters["project"]["files"]
  readonly trusted: boolean
}

const decodeSummarize = ParseResult.decodeUnknownEither(SummarizeConfig, { onExcessProperty: "error", errors: "all" })
const encodeSummarize = Schema.encodeSync(SummarizeConfig)
const SUMMARIZE_DEFAULTS: SummarizeSettings = Schema.decodeUnknownSync(SummarizeConfig)({})

/** The `*.json` files of rtk's project filter directory, read and checked (a file with an error is not used). */
const readProjectFilters = (dir: string, trusted: boolean, key: string) =>
  Effect.gen(function* () {
    const filters: Array<rtk.FilterSpec> = []
    const files: Array<{ file: string; filters: number; errors: ReadonlyArray<string> }> = []
    for (const n of jsonFiles(dir)) {
      let parsed: unknown
      try {
        parsed = JSON.parse(fs.readFileSync(path.join(dir, n), "utf8"))
      } catch (e) {
        files.push({ file: n, filters: 0, errors: [`not JSON: ${(e as Error).message}`] })
        continue
      }
      const r = rtk.parseProjectFilters(parsed, trusted)
      if (r.ok) {
        filters.push(...r.filters)
        files.push({ file: n, filters: r.filters.length, errors: [] })
      } else {
        files.push({ file: n, filters: 0, errors: r.errors })
        yield* Effect.logWarning(`rtk filter file ${n} is not used: ${r.errors.join("; ")}`)
      }
    }
    return { key, filters, files, trusted } satisfies ProjectFilters
  })

const jsonFiles = (dir: string): ReadonlyArray<string> => {
  try {
    return fs
      .readdirSync(dir)
      .filter((n) => n.endsWith(".json"))
      .sort()
  } catch {
    return []
  }
}

/** What identifies the directory's state: the flag and each file's name and modification time. */
const projectStamp = (dir: string, trusted: boolean) =>
  `${trusted}|${jsonFiles(dir)
    .map((n) => {
      try {
        return `${n}:${fs.statSync(path.join(dir, n)).mtimeMs}`
      } catch {
        return n
      }
    })
    .join(",")}`

/**
 * The engines' settings: each engine's as stored (kv, read at start and by `reload`, so another
 * process's change is picked up), summarize's decoded apart, and rtk's project filter files
 * (docs/compression.md). A step's own settings merge over the engine's, decoded once per text.
 */
export const makeEngineSettings = (deps: { readonly kv: KeyValueShape; readonly flags: FeatureFlagsShape; readonly projectDir: string }) =>
  Effect.gen(function* () {
    const { kv, flags, projectDir } = deps
    let summarize: SummarizeSettings = SUMMARIZE_DEFAULTS
    const configured = new Map<EngineId, unknown>()
    const decoded = new Map<string, unknown>()
    let storedText = ""
    let project: ProjectFilters = { key: "", filters: [], files: [], trusted: false }

    const reloadConfigs = Effect.gen(function* () {
      const entries = yield* kv.entries(CONFIG_NAMESPACE)
      const text = JSON.stringify([...entries].sort(([a], [b]) => (a < b ? -1 : 1)))
      if (text === storedText) return
      storedText = text
      configured.clear()
      for (const [id, value] of entries) {
        if (id === "summarize") {
          const d = Either.flatMap(
            Either.try(() => JSON.parse(value) as unknown),
            (j) => decodeSummarize(j)
          )
          if (Either.isRight(d)) summarize = d.right
          else yield* Effect.logWarning("the stored settings of compression engine summarize do not decode; using its defaults")
          continue
        }
        if (!ENGINES.has(id as EngineId)) continue
        try {
          configured.set(id as EngineId, JSON.parse(value))
        } catch {
          yield* Effect.logWarning(`the stored settings of compression engine ${id} are not JSON; using its defaults`)
        }
      }
      if (!entries.some(([id]) => id === "summarize")) summarize = SUMMARIZE_DEFAULTS
      decoded.clear()
    })

    // Read again when a file or GATEWAY_RTK_TRUST_PROJECT_FILTERS changes.
    const loadProject = Effect.gen(function* () {
      const trusted = yield* flags.enabled("GATEWAY_RTK_TRUST_PROJECT_FILTERS")
      const key = projectStamp(projectDir, trusted)
      if (key === project.key) return
      project = yield* readProjectFilters(projectDir, trusted, key)
      decoded.clear()
    })

    /** An engine's settings: configured, then a step's own over them; cached by their text. */
    const settingsOf = (entry: EngineEntry, own: Readonly<Record<string, unknown>> | undefined): Either.Either<unknown, string> => {
      const base = configured.get(entry.engine.id)
      const merged = own ? { ...(typeof base === "object" && base !== null ? base : {}), ...own } : (base ?? {})
      const key = `${entry.engine.id}\u0000${JSON.stringify(merged)}`
      const hit = decoded.get(key)
      if (hit !== undefined) return Either.right(hit)
      let d = entry.decode(merged)
      if (Either.isRight(d) && entry.engine.id === "rtk" && project.filters.length > 0) {
        const c = d.right as rtk.RtkConfig
        d = Either.right({ ...c, customFilters: [...c.customFilters, ...project.filters] })
      }
      if (Either.isRight(d)) {
        if (decoded.size > 1000) decoded.clear()
        decoded.set(key, d.right)
      }
      return d
    }

    const config = (engine: EngineId) =>
      Effect.sync(() => {
        if (engine === "summarize") return encodeSummarize(summarize) as Record<string, unknown>
        const entry = ENGINES.get(engine)!
        const c = settingsOf(entry, undefined)
        return (Either.isRight(c) ? entry.encode(c.right) : entry.encode(Either.getOrThrow(entry.decode({})))) as Record<string, unknown>
      })

    const setConfig = (engine: EngineId, input: unknown) =>
      Effect.gen(function* () {
        if (engine === "summarize") {
          const d = decodeSummarize(input)
          if (Either.isLeft(d)) return yield* new BadRequest({ message: describeParseError(new ParseResult.ParseError({ issue: d.left })) })
          const encoded = encodeSummarize(d.right) as Record<string, unknown>
          yield* kv.set(CONFIG_NAMESPACE, "summarize", JSON.stringify(encoded))
          summarize = d.right
          return encoded
        }
        const entry = ENGINES.get(engine)!
        const d = entry.decode(input)
        if (Either.isLeft(d)) return yield* new BadRequest({ message: d.left })
        const encoded = entry.encode(d.right) as Record<string, unknown>
        yield* kv.set(CONFIG_NAMESPACE, engine, JSON.stringify(encoded))
        configured.set(engine, encoded)
        decoded.clear()
        return encoded
      })

    const rtkFilters = Effect.gen(function* () {
      yield* loadProject
      const c = settingsOf(ENGINES.get("rtk")!, undefined)
      const current = (Either.isRight(c) ? c.right : rtk.DEFAULT_RTK_CONFIG) as rtk.RtkConfig
      const enabled = (id: string, builtin: boolean) => !current.disabledFilters.includes(id) && (!builtin || current.filters.includes(id))
      const projectIds = new Set(project.filters.map((f) => f.id))
      return {
        filters: [
          ...current.customFilters.map((f) => ({
            id: f.id,
            description: f.description,
            source: projectIds.has(f.id) ? ("project" as const) : ("custom" as const),
            enabled: enabled(f.id, false),
            match: f.match
          })),
          ...rtk.listFilters().map((f) => ({ ...f, source: "builtin" as const, enabled: enabled(f.id, true) }))
        ],
        project: { dir: projectDir, trusted: project.trusted, files: project.files }
      } satisfies RtkFilters
    })

    yield* reloadConfigs
    yield* loadProject
    return {
      /** Summarize's settings now. */
      summarize: (): SummarizeSettings => summarize,
      settingsOf,
      /** Reads the stored settings and the project files again (both change from outside). */
      reload: Effect.zipRight(loadProject, reloadConfigs),
      config,
      setConfig,
      rtkFilters
    }
  })

export type EngineSettings = Effect.Effect.Success<ReturnType<typeof makeEngineSettings>>
