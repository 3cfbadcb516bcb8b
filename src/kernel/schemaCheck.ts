/**
 * An answer checked against the JSON Schema its request asked for (docs/structured-outputs.md),
 * with a maintained validator: ajv, draft 2020-12 by default and draft-07 when the schema says so
 * (`$schema`), formats included. Loaded on the first request that asks for a schema, never at
 * start; each schema compiled once (by its text, the 256 most recent kept).
 */
import type { Ajv as AjvShape, ValidateFunction } from "ajv"

export type SchemaStatus = "valid" | "repaired" | "invalid"

export interface Verdict {
  readonly valid: boolean
  /** The validator's errors, one line each (at most 10), `<path> <message>`. */
  readonly errors: ReadonlyArray<string>
}

export interface Engines {
  readonly draft07: AjvShape
  readonly draft2020: AjvShape
}

type AjvClass = new (options: Record<string, unknown>) => AjvShape
const classOf = (m: unknown): unknown => {
  const d = (m as { default?: unknown }).default
  return (d as { default?: unknown } | undefined)?.default ?? d ?? m
}

let engines: Promise<Engines> | undefined
let ready: Engines | undefined
/** The validator once loaded (a stream's end checks its answer synchronously). */
export const readyEngines = (): Engines | undefined => ready
const load = (): Promise<Engines> =>
  (engines ??= (async () => {
    const [ajv, ajv2020, formats] = await Promise.all([import("ajv"), import("ajv/dist/2020.js"), import("ajv-formats")])
    const addFormats = classOf(formats) as (ajv: AjvShape) => AjvShape
    const options = { strict: false, allErrors: true, validateFormats: true }
    ready = {
      draft07: addFormats(new (classOf(ajv) as AjvClass)(options)),
      draft2020: addFormats(new (classOf(ajv2020) as AjvClass)(options))
    }
    return ready
  })())

/** Starts loading the validator (the first schema request waits for it). */
export const schemaEngines = (): Promise<Engines> => load()

const compiled = new Map<string, ValidateFunction | null>()
const MAX_COMPILED = 256

/** The schema's validator; null when ajv cannot compile it (an invalid schema, a `$ref` it cannot resolve). */
const validatorOf = (e: Engines, schema: Record<string, unknown>): ValidateFunction | null => {
  const key = JSON.stringify(schema)
  const known = compiled.get(key)
  if (known !== undefined) return known
  const { $schema, ...rest } = schema
  const engine = typeof $schema === "string" && /draft-0[4-7]/.test($schema) ? e.draft07 : e.draft2020
  let v: ValidateFunction | null
  try {
    v = engine.compile(rest)
  } catch {
    v = null
  }
  compiled.set(key, v)
  if (compiled.size > MAX_COMPILED) compiled.delete(compiled.keys().next().value as string)
  return v
}

/**
 * The answer's text checked against the schema. Undefined when the schema cannot be compiled
 * (the answer is then neither called valid nor invalid).
 */
export const checkAnswer = (e: Engines, schema: Record<string, unknown>, text: string): Verdict | undefined => {
  const validate = validatorOf(e, schema)
  if (validate === null) return undefined
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    return { valid: false, errors: [`the answer is not JSON: ${err instanceof Error ? err.message : String(err)}`] }
  }
  if (validate(value)) return { valid: true, errors: [] }
  return { valid: false, errors: (validate.errors ?? []).slice(0, 10).map((x) => `${x.instancePath || "/"} ${x.message ?? "is invalid"}`) }
}

/** What the repair attempt tells the model (the validation errors, then what to do). */
export const repairPrompt = (errors: ReadonlyArray<string>): string =>
  `Your answer does not match the required JSON schema:\n${errors.map((e) => `- ${e}`).join("\n")}\nAnswer again with only the corrected JSON, valid against the schema, and nothing else.`
