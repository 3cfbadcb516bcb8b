import * as Schema from "effect/Schema"
import { SKILL_IDS } from "../skills/SkillCatalog.js"
import { oneOf, strict } from "./parse.js"

/**
 * The agent-skill catalog over REST (spec document 2, "Agent skill", "Agent skill discovery";
 * docs/skills.md): 42 markdown files, listed, served raw, and regenerated from the gateway's
 * own definitions.
 */

const Category = Schema.Literal("api", "cli")

export const SkillEntry = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.String,
  category: Category,
  area: Schema.String,
  /** Absolute, on the origin the caller used. */
  rawUrl: Schema.String
})

export const SkillList = Schema.Struct({ skills: Schema.Array(SkillEntry) })

/** `GET /api/agent-skills` filters; a category other than `api` or `cli` is a 400 naming it. */
export const SkillListQuery = Schema.Struct({
  category: Schema.optional(oneOf(["api", "cli"], "category")),
  area: Schema.optional(Schema.String)
})

const Count = Schema.Struct({ have: Schema.Number, total: Schema.Number })

export const SkillCoverageView = Schema.Struct({
  api: Count,
  cli: Count,
  totalSkills: Schema.Number,
  generatedAt: Schema.String
})

/** `POST /api/agent-skills/generate`; every field optional (an empty body regenerates all 42). */
export const GenerateSkills = Schema.Struct({
  dryRun: Schema.optional(Schema.Boolean),
  prune: Schema.optional(Schema.Boolean),
  onlyIds: Schema.optional(Schema.Array(oneOf(SKILL_IDS, "onlyIds")))
}).annotations(strict)

export const GenerateError = Schema.Struct({
  /** `unmapped-route`, `unmapped-command`, `write-failed`. */
  code: Schema.String,
  message: Schema.String
})

/** The generator's report: skill ids (orphans: file names without `.md`) and errors. */
export const GenerateReport = Schema.Struct({
  dir: Schema.String,
  dryRun: Schema.Boolean,
  generated: Schema.Array(Schema.String),
  unchanged: Schema.Array(Schema.String),
  pruned: Schema.Array(Schema.String),
  orphansDetected: Schema.Array(Schema.String),
  errors: Schema.Array(GenerateError)
})
export type GenerateReport = typeof GenerateReport.Type
