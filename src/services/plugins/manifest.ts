/**
 * A plugin's `plugin.json` (spec document 3, "Plugin definition and manifest"; docs/plugins.md),
 * decoded with Effect Schema: every field of the spec, unknown fields refused, one line per
 * problem. Also the configuration its `configSchema` describes: the values checked and the
 * defaults filled in, and the integrity hash of the entry file.
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as crypto from "node:crypto"
import * as path from "node:path"
import { describeIssues, strict } from "../../domain/parse.js"
import { PLUGIN_HOOKS, PLUGIN_PERMISSIONS, type PluginHook } from "./sandbox/protocol.js"

const KEBAB = /^[a-z0-9]+(-[a-z0-9]+)*$/

const HookSetting = Schema.Union(
  Schema.Boolean,
  Schema.Struct({
    enabled: Schema.optional(Schema.Boolean),
    priority: Schema.optional(Schema.Number.pipe(Schema.finite()))
  }).annotations(strict)
)

/** Each hook optional: a manifest names the ones it sets. */
const HOOK_FIELDS = Object.fromEntries(PLUGIN_HOOKS.map((h) => [h, Schema.optional(HookSetting)])) as {
  readonly [K in PluginHook]: Schema.optional<typeof HookSetting>
}

const ConfigField = Schema.Struct({
  type: Schema.Literal("string", "number", "boolean", "select"),
  default: Schema.optional(Schema.Union(Schema.String, Schema.Number, Schema.Boolean)),
  min: Schema.optional(Schema.Number.pipe(Schema.finite())),
  max: Schema.optional(Schema.Number.pipe(Schema.finite())),
  enum: Schema.optional(Schema.Array(Schema.Union(Schema.String, Schema.Number)).pipe(Schema.minItems(1))),
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(2000)))
})
  .annotations(strict)
  .pipe(
    Schema.filter((f) => {
      if (f.type === "select" && f.enum === undefined) return "a select field needs enum"
      if (f.type !== "select" && f.enum !== undefined) return "enum is for select fields"
      if (f.type !== "number" && (f.min !== undefined || f.max !== undefined)) return "min and max are for number fields"
      if (f.min !== undefined && f.max !== undefined && f.min > f.max) return "min is greater than max"
      if (f.default !== undefined) {
        const problem = fieldProblem(f, f.default)
        if (problem !== undefined) return `default ${problem}`
      }
      return undefined
    })
  )
export type ConfigFieldSpec = typeof ConfigField.Type

export const PluginManifest = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(KEBAB, { message: () => "must be kebab-case, e.g. my-plugin" }), Schema.maxLength(100)),
  version: Schema.String.pipe(Schema.pattern(/^\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$/, { message: () => "must be a version like 1.2.3" })),
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))),
  author: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  main: Schema.String.pipe(
    Schema.minLength(1),
    Schema.filter((m) =>
      path.isAbsolute(m) || path.normalize(m).startsWith("..") ? "must be a file inside the plugin's folder" : undefined
    )
  ),
  hooks: Schema.optional(Schema.Struct(HOOK_FIELDS).annotations(strict)),
  requires: Schema.optional(
    Schema.Struct({ permissions: Schema.optional(Schema.Array(Schema.Literal(...PLUGIN_PERMISSIONS))) }).annotations(strict)
  ),
  enabledByDefault: Schema.optional(Schema.Boolean),
  /** A guard: when the plugin cannot answer, its requests are refused (503 plugin_unavailable) instead of let through. */
  failClosed: Schema.optional(Schema.Boolean),
  configSchema: Schema.optional(Schema.Record({ key: Schema.String.pipe(Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]*$/)), value: ConfigField })),
  /** `sha256-<base64>` of the entry file, checked before it is loaded. */
  integrity: Schema.optional(
    Schema.String.pipe(Schema.pattern(/^sha256-[A-Za-z0-9+/]{43}=$/, { message: () => "must be sha256-<base64 of the digest>" }))
  )
}).annotations(strict)
export type PluginManifest = typeof PluginManifest.Type

/** A manifest, or one line per problem (`name: must be kebab-case...; hooks.onFoo: is unexpected`). */
export const decodeManifest = (json: unknown): Either.Either<PluginManifest, string> =>
  Either.mapLeft(Schema.decodeUnknownEither(PluginManifest, { errors: "all" })(json), (e) => {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(e)
    // An optional object with a problem inside also fails its "or nothing" branch: that line says
    // nothing the deeper one does not (`hooks: expected undefined` beside `hooks.onFrame: is unexpected`).
    const deeper = (path: ReadonlyArray<PropertyKey>) =>
      issues.some((i) => i.path.length > path.length && path.every((k, n) => i.path[n] === k))
    return describeIssues(issues.filter((i) => !(/^Expected undefined/.test(i.message) && deeper(i.path))))
  })

/** Whether a hook is on and at which priority: the manifest's setting over the definition's priority (default 100). */
export const hookSetting = (
  manifest: PluginManifest,
  hook: PluginHook,
  definitionPriority = 100
): { enabled: boolean; priority: number } => {
  const s = manifest.hooks?.[hook]
  if (s === undefined) return { enabled: true, priority: definitionPriority }
  if (typeof s === "boolean") return { enabled: s, priority: definitionPriority }
  return { enabled: s.enabled ?? true, priority: s.priority ?? definitionPriority }
}

function fieldProblem(field: Pick<ConfigFieldSpec, "type" | "min" | "max" | "enum">, value: unknown): string | undefined {
  switch (field.type) {
    case "string":
      return typeof value === "string" ? undefined : `must be a string, got ${JSON.stringify(value)}`
    case "boolean":
      return typeof value === "boolean" ? undefined : `must be true or false, got ${JSON.stringify(value)}`
    case "number":
      if (typeof value !== "number" || !Number.isFinite(value)) return `must be a number, got ${JSON.stringify(value)}`
      if (field.min !== undefined && value < field.min) return `must be at least ${field.min}, got ${value}`
      if (field.max !== undefined && value > field.max) return `must be at most ${field.max}, got ${value}`
      return undefined
    case "select":
      return field.enum?.includes(value as string | number)
        ? undefined
        : `must be one of ${field.enum?.map((e) => JSON.stringify(e)).join(", ")}, got ${JSON.stringify(value)}`
  }
}

/**
 * The configuration `values` checked against `schema`, with the defaults of the fields not given:
 * the values, or one line per problem (a field the schema does not have is one).
 */
export const validateConfig = (
  schema: PluginManifest["configSchema"],
  values: Readonly<Record<string, unknown>>
): Either.Either<Record<string, string | number | boolean>, string> => {
  const fields = schema ?? {}
  const problems: Array<string> = []
  const out: Record<string, string | number | boolean> = {}
  for (const key of Object.keys(values)) if (!(key in fields)) problems.push(`${key}: is not a setting of this plugin`)
  for (const [key, field] of Object.entries(fields)) {
    const value = values[key] ?? field.default
    if (value === undefined) continue
    const problem = fieldProblem(field, value)
    if (problem !== undefined) problems.push(`${key}: ${problem}`)
    else out[key] = value as string | number | boolean
  }
  return problems.length > 0 ? Either.left(problems.join("; ")) : Either.right(out)
}

/** The `integrity` value of a file's bytes: `sha256-` and the digest in base64. */
export const integrityOf = (bytes: Uint8Array): string => `sha256-${crypto.createHash("sha256").update(bytes).digest("base64")}`
