/**
 * Structured outputs across families (docs/structured-outputs.md): where each inbound format
 * carries the client's JSON Schema, and the schema each upstream family's native mechanism takes.
 * The answer is always validated against the client's original schema (src/kernel/schemaCheck.ts).
 */
import type { FormatId } from "../../domain/canonical.js"
import { obj, str } from "./common.js"

type Schema = Record<string, unknown>

/** Keys whose value is a map of named subschemas (never themselves schemas). */
const NAMED = new Set(["properties", "$defs", "definitions"])

/** A key's value with each subschema in it passed through `f` (named maps by entry, anything else structured as a whole). */
const mapSub = (k: string, v: unknown, f: (s: unknown) => unknown): unknown =>
  NAMED.has(k)
    ? Object.fromEntries(Object.entries(obj(v) ?? {}).map(([p, x]) => [p, f(x)]))
    : typeof v === "object" && v !== null
      ? f(v)
      : v

const lower = (s: unknown): unknown => {
  if (Array.isArray(s)) return s.map(lower)
  const o = obj(s)
  if (!o) return s
  const out: Schema = {}
  for (const [k, v] of Object.entries(o)) {
    if (k === "type")
      out[k] = typeof v === "string" ? v.toLowerCase() : Array.isArray(v) ? v.map((t) => (typeof t === "string" ? t.toLowerCase() : t)) : v
    else if (k !== "nullable") out[k] = mapSub(k, v, lower)
  }
  // OpenAPI's `nullable: true` (Gemini's responseSchema) is JSON Schema's `null` in the type.
  if (o["nullable"] === true && typeof out["type"] === "string") out["type"] = [out["type"], "null"]
  return out
}

/** The JSON Schema a request asks its answer to match, in the client's own format; undefined when it asks for none. */
export const requestedSchema = (format: FormatId, body: Record<string, unknown>): Schema | undefined => {
  switch (format) {
    case "openai-chat": {
      const rf = obj(body["response_format"])
      return rf?.["type"] === "json_schema" ? obj(obj(rf["json_schema"])?.["schema"]) : undefined
    }
    case "openai-responses": {
      const f = obj(obj(body["text"])?.["format"])
      return f?.["type"] === "json_schema" ? obj(f["schema"]) : undefined
    }
    case "anthropic": {
      const f = obj(obj(body["output_config"])?.["format"]) ?? obj(body["output_format"])
      return f?.["type"] === "json_schema" ? obj(f["schema"]) : undefined
    }
    case "gemini": {
      const g = obj(body["generationConfig"]) ?? obj(body["generation_config"])
      const json = obj(g?.["responseJsonSchema"] ?? g?.["response_json_schema"])
      if (json) return json
      const openApi = obj(g?.["responseSchema"] ?? g?.["response_schema"])
      return openApi ? (lower(openApi) as Schema) : undefined
    }
    case "ollama":
      return obj(body["format"])
  }
}

/** Keywords Anthropic's structured outputs do not take: moved into the description (the answer is still validated against them). */
const ANTHROPIC_UNSUPPORTED = [
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "minLength",
  "maxLength",
  "maxItems",
  "minProperties",
  "maxProperties"
]

/**
 * Anthropic's structured outputs: every object closed (`additionalProperties: false` is
 * required), numeric and length constraints moved into the description, `minItems` only 0 or 1.
 */
export const anthropicOutputSchema = (schema: unknown): unknown => {
  if (Array.isArray(schema)) return schema.map(anthropicOutputSchema)
  const o = obj(schema)
  if (!o) return schema
  const out: Schema = {}
  const moved: Array<string> = []
  for (const [k, v] of Object.entries(o)) {
    if (k === "$schema") continue
    if (ANTHROPIC_UNSUPPORTED.includes(k) || (k === "minItems" && typeof v === "number" && v > 1)) moved.push(`${k}: ${JSON.stringify(v)}`)
    else if (k === "additionalProperties") out[k] = false
    else out[k] = mapSub(k, v, anthropicOutputSchema)
  }
  const isObject =
    o["type"] === "object" || (Array.isArray(o["type"]) && o["type"].includes("object")) || obj(o["properties"]) !== undefined
  if (isObject) out["additionalProperties"] = false
  if (moved.length > 0) out["description"] = [str(o["description"]), `(${moved.join(", ")})`].filter(Boolean).join(" ")
  return out
}

/** Negation, conditionals and pattern-keyed or unevaluated properties: neither Gemini nor OpenAI's strict mode takes them. */
const CONDITIONALS = ["not", "if", "then", "else", "dependentRequired", "dependentSchemas", "patternProperties", "unevaluatedProperties"]

/** Keywords Gemini's `responseJsonSchema` does not take. */
const GEMINI_JSON_UNSUPPORTED = new Set([
  "$schema",
  "$id",
  "$comment",
  "examples",
  "default",
  "const",
  ...CONDITIONALS,
  "allOf",
  "oneOf",
  "pattern",
  "minLength",
  "maxLength",
  "uniqueItems",
  "multipleOf",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "minProperties",
  "maxProperties"
])

/**
 * Gemini's `responseJsonSchema`: JSON Schema with `$ref`/`$defs` (so recursive schemas work),
 * `anyOf`, enums and formats; `oneOf` sent as `anyOf`, `const` as a one-value enum, draft-07's
 * `definitions` as `$defs`, the keywords it refuses left out (the answer is still validated
 * against the client's schema).
 */
export const geminiJsonSchema = (schema: unknown): unknown => {
  if (Array.isArray(schema)) return schema.map(geminiJsonSchema)
  const o = obj(schema)
  if (!o) return schema
  const out: Schema = {}
  for (const [k, v] of Object.entries(o)) {
    if (k === "oneOf") out["anyOf"] = geminiJsonSchema(v)
    else if (k === "const") out["enum"] = [v]
    else if (k === "allOf" && Array.isArray(v) && v.length === 1) Object.assign(out, geminiJsonSchema(v[0]))
    else if (k === "definitions" || k === "$defs") out["$defs"] = mapSub(k, v, geminiJsonSchema)
    else if (k === "$ref" && typeof v === "string") out[k] = v.replace("#/definitions/", "#/$defs/")
    else if (!GEMINI_JSON_UNSUPPORTED.has(k)) out[k] = mapSub(k, v, geminiJsonSchema)
  }
  return out
}

/** What OpenAI's strict mode does not take: a schema using them is sent without `strict`. */
const STRICT_UNSUPPORTED = new Set(["allOf", ...CONDITIONALS, "propertyNames", "contains", "minProperties", "maxProperties"])

/**
 * OpenAI's strict mode rules: every object closed and every property required, an optional
 * property made nullable instead (`nullable` marks where, so a `null` the model gives there is
 * taken out again: see `withoutAddedNulls`). Undefined when the schema uses what strict mode
 * does not take, or its root is not an object.
 */
export const strictSchema = (schema: Schema): Schema | undefined => {
  let ok = schema["type"] === "object"
  const walk = (s: unknown): unknown => {
    if (Array.isArray(s)) return s.map(walk)
    const o = obj(s)
    if (!o) return s
    const out: Schema = {}
    for (const [k, v] of Object.entries(o)) {
      if (STRICT_UNSUPPORTED.has(k) || (k === "additionalProperties" && v !== false && v !== undefined)) ok = false
      if (k === "$schema") continue
      // Strict mode takes anyOf only; the answer is still validated against the client's oneOf.
      if (k === "oneOf") out["anyOf"] = walk(v)
      else out[k] = mapSub(k, v, walk)
    }
    const props = obj(o["properties"])
    if (props) {
      const required = new Set(Array.isArray(o["required"]) ? (o["required"] as Array<string>) : [])
      const properties = out["properties"] as Schema
      for (const p of Object.keys(props)) if (!required.has(p)) properties[p] = { anyOf: [properties[p], { type: "null" }] }
      out["required"] = Object.keys(props)
      out["additionalProperties"] = false
    } else if (o["type"] === "object") out["additionalProperties"] = false
    return out
  }
  const strict = walk(schema) as Schema
  return ok ? strict : undefined
}

/**
 * A value answered under `strictSchema`, with the `null`s strict mode made the model give for
 * optional properties taken out again (where the client's schema does not itself allow null).
 */
export const withoutAddedNulls = (schema: Schema, value: unknown): unknown => {
  const root = schema
  const resolve = (s: unknown): Schema | undefined => {
    const o = obj(s)
    const ref = str(o?.["$ref"])
    if (!ref?.startsWith("#/")) return o
    let at: unknown = root
    for (const part of ref.slice(2).split("/")) at = obj(at)?.[part.replace(/~1/g, "/").replace(/~0/g, "~")]
    return obj(at)
  }
  const allowsNull = (s: Schema | undefined): boolean =>
    s === undefined ||
    s["type"] === "null" ||
    (Array.isArray(s["type"]) && s["type"].includes("null")) ||
    (Array.isArray(s["anyOf"]) && s["anyOf"].some((x) => allowsNull(resolve(x))))
  const walk = (s: Schema | undefined, v: unknown): unknown => {
    if (s === undefined) return v
    if (Array.isArray(v)) return obj(s["items"]) ? v.map((x) => walk(resolve(s["items"]), x)) : v
    const o = obj(v)
    if (!o) return v
    const props = obj(s["properties"])
    if (!props) return v
    const required = new Set(Array.isArray(s["required"]) ? (s["required"] as Array<string>) : [])
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(o)) {
      const ps = resolve(props[k])
      if (x === null && !required.has(k) && !allowsNull(ps)) continue
      out[k] = walk(ps, x)
    }
    return out
  }
  return walk(resolve(schema), value)
}

export interface SchemaVerdict {
  readonly status: "valid" | "invalid"
  readonly errors: ReadonlyArray<string>
}

/**
 * The verdict on a streamed answer, as the last event of the client's stream (no repair: the
 * text has gone). Each is one clients of that format skip when they do not know it: a chat
 * chunk with no choices (before `[DONE]`), an Anthropic or Responses event of its own type, a
 * Gemini chunk with no candidates. The data alone (`framed: false`) for a JSON array or a
 * WebSocket message; Ollama's stream gets none.
 */
export const schemaEvent = (format: FormatId, verdict: SchemaVerdict, model: string, framed = true): string | undefined => {
  const v = { status: verdict.status, errors: verdict.errors }
  const sse = (event: string | undefined, data: unknown) =>
    framed ? `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n` : JSON.stringify(data)
  switch (format) {
    case "openai-chat":
      return sse(undefined, {
        id: "gateway-schema",
        object: "chat.completion.chunk",
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [],
        gateway_schema: v
      })
    case "anthropic":
      return sse("gateway_schema", { type: "gateway_schema", ...v })
    case "openai-responses":
      return sse("gateway.schema", { type: "gateway.schema", ...v })
    case "gemini":
      return sse(undefined, { candidates: [], modelVersion: model, gatewaySchema: v })
    case "ollama":
      return undefined
  }
}
