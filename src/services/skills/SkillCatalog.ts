import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { PACKAGE_ROOT } from "../../kernel/packageRoot.js"
import type { GenerateOptions, GenerateReport } from "../../cli/skills/generate.js"
import {
  API_SKILL_IDS,
  CLI_SKILL_IDS,
  isSkillId,
  SKILL_IDS,
  skillArea,
  type SkillCategory,
  skillCategory,
  type SkillId
} from "../../domain/skills.js"

export { API_SKILL_IDS, CLI_SKILL_IDS, isSkillId, SKILL_IDS, skillArea, type SkillCategory, skillCategory, type SkillId }

/** A catalog entry (spec document 2, "Agent skill"). */
export interface SkillEntry {
  readonly id: string
  readonly name: string
  readonly description: string
  readonly category: SkillCategory
  readonly area: string
  /** Absolute when the caller gave a base URL, else the path `/api/agent-skills/{id}/raw`. */
  readonly rawUrl: string
  /** The files in the skill's `scripts/` folder (`<dir>/<id>/scripts/`), sorted. */
  readonly scripts: ReadonlyArray<string>
}

export interface SkillCoverage {
  readonly api: { readonly have: number; readonly total: number }
  readonly cli: { readonly have: number; readonly total: number }
  readonly totalSkills: number
  /** ISO 8601: when the newest skill file present was last written. */
  readonly generatedAt: string
}

export interface SkillFilter {
  readonly category?: SkillCategory | undefined
  readonly area?: string | undefined
}

export interface SkillCatalogShape {
  /** The skills present, in catalog order. `baseUrl` (an origin) makes `rawUrl` absolute. */
  readonly list: (filter?: SkillFilter, baseUrl?: string) => Effect.Effect<ReadonlyArray<SkillEntry>>
  /** One skill's metadata, its markdown file and that file's front matter (the skill's manifest). */
  readonly get: (
    id: string,
    baseUrl?: string
  ) => Effect.Effect<
    Option.Option<{ readonly skill: SkillEntry; readonly markdown: string; readonly manifest: Readonly<Record<string, string>> }>
  >
  readonly coverage: Effect.Effect<SkillCoverage>
  /** Where the skill files live (one `<id>.md` per skill, and a skill's own folder `<id>/`, with its `scripts/`). */
  readonly dir: string
  /** Regenerates the files in `dir` from the gateway's own definitions (generate.ts). */
  readonly generate: (options?: GenerateOptions) => Effect.Effect<GenerateReport>
}

/** The skills shipped with the package: `skills/` at the package root. */
export const DEFAULT_SKILLS_DIR = path.join(PACKAGE_ROOT, "skills")

/** Front matter: the `key: value` lines between the leading `---` fences. */
export const parseFrontMatter = (markdown: string): Record<string, string> => {
  const m = /^---\r?\n([\s\S]*?)\r?\n---/.exec(markdown)
  const out: Record<string, string> = {}
  if (!m) return out
  for (const line of m[1]!.split(/\r?\n/)) {
    const i = line.indexOf(":")
    if (i <= 0) continue
    let value = line.slice(i + 1).trim()
    if (value.length >= 2 && (value.startsWith('"') || value.startsWith("'")) && value.endsWith(value[0]!)) {
      value = value[0] === '"' ? (JSON.parse(value) as string) : value.slice(1, -1)
    }
    out[line.slice(0, i).trim()] = value
  }
  return out
}

const rawUrlOf = (id: string, baseUrl?: string) => `${(baseUrl ?? "").replace(/\/+$/, "")}/api/agent-skills/${id}/raw`

/**
 * The agent-skill catalog: the markdown files in one directory, read on each call (they are
 * few and small, and regeneration replaces them while the gateway runs). Only the catalog's 42
 * ids are served; other files in the directory are orphans (the generator reports them).
 */
export class SkillCatalog extends Context.Tag("gateway/SkillCatalog")<SkillCatalog, SkillCatalogShape>() {
  static readonly make = (dir: string): SkillCatalogShape => {
    const read = (id: string) =>
      Effect.promise(() =>
        fs.readFile(path.join(dir, `${id}.md`), "utf8").then(
          (markdown) => ({ markdown }),
          () => undefined
        )
      )
    const scriptsOf = (id: string) =>
      Effect.promise(() =>
        fs.readdir(path.join(dir, id, "scripts"), { withFileTypes: true }).then(
          (entries) =>
            entries
              .filter((e) => e.isFile())
              .map((e) => e.name)
              .sort(),
          () => [] as Array<string>
        )
      )
    const entry = (id: string, markdown: string, baseUrl?: string) =>
      Effect.map(scriptsOf(id), (scripts): SkillEntry => {
        const fm = parseFrontMatter(markdown)
        return {
          id,
          name: fm.name ?? id,
          description: fm.description ?? "",
          category: skillCategory(id),
          area: skillArea(id),
          rawUrl: rawUrlOf(id, baseUrl),
          scripts
        }
      })
    const present = Effect.promise(() => fs.readdir(dir).catch(() => [] as Array<string>)).pipe(
      Effect.map((files) => new Set(files.filter((f) => f.endsWith(".md")).map((f) => f.slice(0, -3))))
    )
    return {
      dir,
      // The generator and what it reads (the whole API and CLI) load on first use only.
      generate: (options) =>
        Effect.flatMap(
          Effect.promise(() => import("../../cli/skills/generate.js")),
          (g) => g.generateSkills(dir, options)
        ),
      list: (filter = {}, baseUrl) =>
        Effect.gen(function* () {
          const have = yield* present
          const ids = SKILL_IDS.filter(
            (id) =>
              have.has(id) &&
              (filter.category === undefined || skillCategory(id) === filter.category) &&
              (filter.area === undefined || skillArea(id) === filter.area)
          )
          const out: Array<SkillEntry> = []
          for (const id of ids) {
            const file = yield* read(id)
            if (file) out.push(yield* entry(id, file.markdown, baseUrl))
          }
          return out
        }),
      get: (id, baseUrl) =>
        isSkillId(id)
          ? Effect.flatMap(read(id), (file) =>
              file
                ? Effect.map(entry(id, file.markdown, baseUrl), (skill) =>
                    Option.some({ skill, markdown: file.markdown, manifest: parseFrontMatter(file.markdown) })
                  )
                : Effect.succeed(Option.none())
            )
          : Effect.succeed(Option.none()),
      coverage: Effect.gen(function* () {
        const have = yield* present
        const stats = yield* Effect.promise(() =>
          Promise.all(
            [...have].filter(isSkillId).map((id) =>
              fs.stat(path.join(dir, `${id}.md`)).then(
                (s) => s.mtimeMs,
                () => 0
              )
            )
          )
        )
        const apiHave = API_SKILL_IDS.filter((id) => have.has(id)).length
        const cliHave = CLI_SKILL_IDS.filter((id) => have.has(id)).length
        return {
          api: { have: apiHave, total: API_SKILL_IDS.length },
          cli: { have: cliHave, total: CLI_SKILL_IDS.length },
          totalSkills: apiHave + cliHave,
          generatedAt: new Date(stats.length > 0 ? Math.max(...stats) : 0).toISOString()
        }
      })
    }
  }

  /** The directory from `GATEWAY_SKILLS_DIR`, else the package's `skills/`. */
  static readonly layer = Layer.effect(
    SkillCatalog,
    Config.string("GATEWAY_SKILLS_DIR").pipe(
      Config.withDefault(DEFAULT_SKILLS_DIR),
      Effect.map((dir) => SkillCatalog.make(path.resolve(dir)))
    )
  )
}
