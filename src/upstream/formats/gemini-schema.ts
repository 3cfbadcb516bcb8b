import { decodePathSegment } from "../../kernel/untrusted.js"

/**
 * Gemini's `parameters` and `responseSchema` take an OpenAPI 3.0 subset, not JSON Schema: other providers' tools are rewritten to
 * fit instead of failing with 400 (every rewrite: docs/formats.md, "Decisions").
 */

type Schema = Record<string, unknown>

const KEEP = new Set([
  "type",
  "format",
  "title",
  "description",
  "nullable",
  "enum",
  "maxItems",
  "minItems",
  "properties",
  "required",
  "minProperties",
  "maxProperties",
  "minLength",
  "maxLength",
  "pattern",
  "example",
  "anyOf",
  "propertyOrdering",
  "default",
  "items",
  "minimum",
  "maximum"
])

const STRING_FORMATS = new Set(["enum", "date-time"])
const NUMBER_FORMATS = new Set(["float", "double", "int32", "int64"])
const TYPES = new Set(["string", "number", "integer", "boolean", "array", "object"])
const MAX_DEPTH = 32
const MAX_NODES = 5000

interface Walk {
  readonly root: Schema
  /** Schema nodes still allowed in the output. */
  budget: number
}

const isObj = (v: unknown): v is Schema => v !== null && typeof v === "object" && !Array.isArray(v)

const resolveRef = (ref: string, root: Schema): Schema | undefined => {
  const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref)
  if (!m) return undefined
  const defs = root[m[1]!]
  // A malformed escape (`%ZZ`) is taken literally rather than thrown.
  const escaped = m[2]!.replace(/~1/g, "/").replace(/~0/g, "~")
  const name = decodePathSegment(escaped) ?? escaped
  return isObj(defs) && isObj(defs[name]) ? (defs[name] as Schema) : undefined
}

const mergeAllOf = (parts: ReadonlyArray<unknown>): Schema => {
  const out: Schema = {}
  for (const p of parts) {
    if (!isObj(p)) continue
    for (const [k, v] of Object.entries(p)) {
      if (k === "properties" && isObj(v)) out["properties"] = { ...(out["properties"] as Schema | undefined), ...v }
      else if (k === "required" && Array.isArray(v)) out["required"] = [...((out["required"] as Array<unknown>) ?? []), ...v]
      else if (!(k in out)) out[k] = v
    }
  }
  return out
}

/** What is left of a schema cut short: its type without structure. */
const cut = (s: Schema): Schema => {
  const type = Array.isArray(s["type"]) ? s["type"].find((t) => t !== "null") : s["type"]
  const kept =
    typeof type === "string" && TYPES.has(type) ? type : isObj(s["properties"]) || typeof s["$ref"] === "string" ? "object" : "string"
  return {
    type: kept,
    ...(kept === "array" ? { items: { type: "string" } } : {}),
    ...(typeof s["description"] === "string" ? { description: s["description"] } : {})
  }
}

const sanitize = (input: unknown, walk: Walk, depth: number, refs: ReadonlySet<string>): Schema => {
  if (!isObj(input)) return { type: "string" }
  if (depth > MAX_DEPTH || walk.budget <= 0) return cut(input)
  walk.budget--
  let s: Schema = input
  if (typeof s["$ref"] === "string") {
    const ref = s["$ref"]
    const target = refs.has(ref) ? undefined : resolveRef(ref, walk.root)
    const { $ref: _ref, ...rest } = s
    s = target
      ? { ...target, ...rest }
      : { type: "object", description: typeof rest["description"] === "string" ? rest["description"] : "object" }
    if (target) refs = new Set([...refs, ref])
  }
  if (Array.isArray(s["allOf"])) {
    const { allOf, ...rest } = s
    s = { ...mergeAllOf(allOf), ...rest }
  }
  const out: Schema = {}

  // type, possibly as an array with "null"
  let type = s["type"]
  if (Array.isArray(type)) {
    const types = type.filter((t) => t !== "null")
    if (types.length < type.length) out["nullable"] = true
    type = types[0]
  }
  if (s["nullable"] === true) out["nullable"] = true

  const anyOf = (Array.isArray(s["anyOf"]) ? s["anyOf"] : Array.isArray(s["oneOf"]) ? s["oneOf"] : undefined) as Array<unknown> | undefined
  if (anyOf) {
    const variants = anyOf.filter((v) => !(isObj(v) && v["type"] === "null"))
    if (variants.length < anyOf.length) out["nullable"] = true
    if (variants.length === 1)
      return {
        ...sanitize({ ...(variants[0] as Schema), ...(s["description"] ? { description: s["description"] } : {}) }, walk, depth + 1, refs),
        ...(out["nullable"] ? { nullable: true } : {})
      }
    if (variants.length > 1) {
      out["anyOf"] = variants.map((v) => sanitize(v, walk, depth + 1, refs))
      if (typeof s["description"] === "string") out["description"] = s["description"]
      return out
    }
  }

  if ("const" in s && !("enum" in s)) s = { ...s, enum: [s["const"]] }
  if (Array.isArray(s["enum"])) {
    out["enum"] = s["enum"].filter((v) => v !== null).map((v) => (typeof v === "string" ? v : JSON.stringify(v)))
    type = "string"
  }

  if (typeof type !== "string" || !TYPES.has(type)) {
    type = isObj(s["properties"]) ? "object" : s["items"] !== undefined || Array.isArray(s["prefixItems"]) ? "array" : "string"
  }
  out["type"] = type

  for (const [k, v] of Object.entries(s)) {
    if (!KEEP.has(k) || k in out || k === "type") continue
    if (k === "format") {
      if (
        typeof v === "string" &&
        ((type === "string" && STRING_FORMATS.has(v)) || ((type === "number" || type === "integer") && NUMBER_FORMATS.has(v)))
      )
        out[k] = v
    } else if (k === "properties" || k === "items" || k === "anyOf" || k === "required") {
      // handled below
    } else if (k === "example" || k === "default") {
      if (v !== null && typeof v !== "object") out[k] = v
    } else out[k] = v
  }

  if (type === "object") {
    const props = isObj(s["properties"]) ? s["properties"] : {}
    const names = Object.keys(props)
    if (names.length > 0) {
      out["properties"] = Object.fromEntries(names.map((n) => [n, sanitize(props[n], walk, depth + 1, refs)]))
      const optional = new Set(names.filter((n) => isObj(props[n]) && (props[n] as Schema)["optional"] === true))
      const required = (Array.isArray(s["required"]) ? s["required"] : []).filter(
        (r): r is string => typeof r === "string" && names.includes(r) && !optional.has(r)
      )
      if (required.length > 0) out["required"] = Array.from(new Set(required))
    }
  }
  if (type === "array") {
    const items = Array.isArray(s["prefixItems"]) ? s["prefixItems"][0] : s["items"]
    out["items"] = isObj(items) ? sanitize(items, walk, depth + 1, refs) : { type: "string" }
  }
  return out
}

/** A JSON Schema rewritten into the Schema subset Gemini accepts. */
export const sanitizeGeminiSchema = (schema: Record<string, unknown>): Record<string, unknown> =>
  sanitize(schema, { root: schema, budget: MAX_NODES }, 0, new Set())

/** Whether a sanitized parameters schema is an object without properties (Gemini wants those omitted). */
export const isEmptyObjectSchema = (schema: Record<string, unknown>): boolean => schema["type"] === "object" && !isObj(schema["properties"])
