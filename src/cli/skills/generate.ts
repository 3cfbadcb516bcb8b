import * as Effect from "effect/Effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { apiSource } from "./apiSource.js"
import { SKILL_TEXT } from "./catalogText.js"
import { type CommandTree, cliSource } from "./cliSource.js"
import { customSection, keptFrontMatter, renderSkill, type SkillDocument } from "./markdown.js"
import { isSkillId, SKILL_IDS, type SkillId } from "../../domain/skills.js"

/**
 * The skill generator (docs/skills.md, "The generator"): the 42 files from the management
 * API's OpenAPI document, the inference route table and the CLI's command tree, each with the
 * custom section of the file it replaces. Deterministic: the same code gives the same bytes.
 */

export interface GenerateOptions {
  /** Compare only: nothing is written or deleted; `generated` and `pruned` say what would be. */
  readonly dryRun?: boolean | undefined
  /** Delete `.md` files in the directory that are not one of the 42 skills. */
  readonly prune?: boolean | undefined
  /** Only these skills (default all 42). */
  readonly onlyIds?: ReadonlyArray<string> | undefined
}

export interface GenerateError {
  readonly code: string
  readonly message: string
}

export interface GenerateReport {
  readonly dir: string
  readonly dryRun: boolean
  /** Skills whose file was written (or, with dryRun, would be): new or different. */
  readonly generated: ReadonlyArray<string>
  readonly unchanged: ReadonlyArray<string>
  readonly pruned: ReadonlyArray<string>
  /** `.md` files in the directory that are not a skill (names without `.md`). */
  readonly orphansDetected: ReadonlyArray<string>
  readonly errors: ReadonlyArray<GenerateError>
}

const CLI_APP: string = "../app.js"

/** Every skill's document, and what the sources could not place. */
export const skillDocuments = async (): Promise<{
  readonly docs: ReadonlyMap<SkillId, SkillDocument>
  readonly errors: ReadonlyArray<GenerateError>
}> => {
  const api = apiSource()
  // Loaded when generating, not with this module: the CLI tree imports the server it can start
  // (which holds this generator). Named through a variable so that its type is not part of this one's.
  const app: { readonly command: CommandTree } = await import(CLI_APP)
  const cli = cliSource(app.command, (id) => SKILL_TEXT[id].api)
  const docs = new Map<SkillId, SkillDocument>()
  for (const id of SKILL_IDS) {
    const text = SKILL_TEXT[id]
    const sections = api.sections.get(id) ?? cli.sections.get(id)!
    docs.set(id, {
      id,
      title: text.title,
      description: text.description,
      overview: text.docs ? `${text.overview}\n\nMore in \`${text.docs}\` of the gateway's repository.` : text.overview,
      authentication: sections.authentication,
      endpoints: sections.endpoints
    })
  }
  return { docs, errors: [...api.errors, ...cli.errors] }
}

const readOrUndefined = (file: string) => fs.readFile(file, "utf8").catch(() => undefined)

/** Replaces `file` in one step (a reader sees the old file or the new one, never half of one). */
const writeAtomically = async (file: string, text: string) => {
  const tmp = `${file}.${process.pid}.tmp`
  await fs.writeFile(tmp, text, "utf8")
  await fs.rename(tmp, file)
}

const failure = (e: unknown) => (e as Error)?.message ?? String(e)

/** Generates the skills into `dir` (created when missing). Never fails: problems are in `errors`. */
export const generateSkills = (dir: string, options: GenerateOptions = {}): Effect.Effect<GenerateReport> =>
  Effect.promise(async () => {
    const dryRun = options.dryRun === true
    const { docs, errors: sourceErrors } = await skillDocuments()
    const errors: Array<GenerateError> = [...sourceErrors]
    const wanted = options.onlyIds ? new Set(options.onlyIds) : undefined
    const generated: Array<string> = []
    const unchanged: Array<string> = []
    if (!dryRun) await fs.mkdir(dir, { recursive: true })
    for (const [id, doc] of docs) {
      if (wanted && !wanted.has(id)) continue
      const file = path.join(dir, `${id}.md`)
      const existing = await readOrUndefined(file)
      const text = renderSkill(doc, customSection(existing), keptFrontMatter(existing))
      if (text === existing) {
        unchanged.push(id)
        continue
      }
      generated.push(id)
      if (!dryRun) await writeAtomically(file, text).catch((e) => errors.push({ code: "write-failed", message: `${file}: ${failure(e)}` }))
    }
    const files = await fs.readdir(dir).catch(() => [] as Array<string>)
    const orphansDetected = files
      .filter((f) => f.endsWith(".md") && !isSkillId(f.slice(0, -3)))
      .map((f) => f.slice(0, -3))
      .sort()
    const pruned: Array<string> = []
    if (options.prune) {
      for (const orphan of orphansDetected) {
        if (dryRun) pruned.push(orphan)
        else
          await fs.rm(path.join(dir, `${orphan}.md`)).then(
            () => pruned.push(orphan),
            (e) => errors.push({ code: "write-failed", message: `${orphan}.md: ${failure(e)}` })
          )
      }
    }
    return { dir, dryRun, generated, unchanged, pruned, orphansDetected, errors }
  })
