import * as Schema from "effect/Schema"
import { oneOf, strict } from "./parse.js"

/** The 22 REST API skills of the catalog; each one's area is its id without `gw-`. */
export const API_SKILL_IDS = [
  "gw-auth",
  "gw-providers",
  "gw-models",
  "gw-combos-routing",
  "gw-api-keys",
  "gw-usage-logs",
  "gw-budget",
  "gw-settings",
  "gw-proxies",
  "gw-cache",
  "gw-compression",
  "gw-context-rtk",
  "gw-resilience",
  "gw-cli-tools",
  "gw-tunnels",
  "gw-sync-cloud",
  "gw-db-backups",
  "gw-webhooks",
  "gw-mcp",
  "gw-agents-a2a",
  "gw-version-manager",
  "gw-inference"
] as const

/** The 20 command-line skills; each one's area is its id. */
export const CLI_SKILL_IDS = [
  "cli-serve",
  "cli-health",
  "cli-providers",
  "cli-keys",
  "cli-models",
  "cli-chat",
  "cli-routing",
  "cli-resilience",
  "cli-compression",
  "cli-contexts",
  "cli-cost-usage",
  "cli-mcp",
  "cli-a2a",
  "cli-tunnel",
  "cli-backup-sync",
  "cli-policy-audit",
  "cli-batches",
  "cli-eval",
  "cli-plugins-skills",
  "cli-setup"
] as const

export type SkillId = (typeof API_SKILL_IDS)[number] | (typeof CLI_SKILL_IDS)[number]

export type SkillCategory = "api" | "cli"

export const skillCategory = (id: string): SkillCategory => (id.startsWith("gw-") ? "api" : "cli")
export const skillArea = (id: string): string => (id.startsWith("gw-") ? id.slice(3) : id)
export const isSkillId = (id: string): id is SkillId =>
  (API_SKILL_IDS as ReadonlyArray<string>).includes(id) || (CLI_SKILL_IDS as ReadonlyArray<string>).includes(id)

/** The 42 ids in catalog order: the API skills, then the CLI skills. */
export const SKILL_IDS: ReadonlyArray<SkillId> = [...API_SKILL_IDS, ...CLI_SKILL_IDS]

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
  rawUrl: Schema.String,
  /** The files of the skill's `scripts/` folder (`<dir>/<id>/scripts/`), which the MCP tool skills_run runs. */
  scripts: Schema.Array(Schema.String)
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
