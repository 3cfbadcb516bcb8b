/**
 * JSON Schema (as the OpenAPI document of the management API holds it) to short readable text
 * for the skill files: `string`, `array of "inference" | "admin"`, `number | null`, and the
 * top-level fields of an object.
 */

type Json = Record<string, unknown>
type Components = Readonly<Record<string, unknown>>

const MAX_ENUM = 12

const asObject = (v: unknown): Json | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : undefined)

const refName = (schema: Json): string | undefined => (typeof schema["$ref"] === "string" ? schema["$ref"].split("/").pop() : undefined)

/** A `$ref` followed once; `undefined` when the component is missing. */
const resolve = (schema: Json, components: Components): Json | undefined => {
  const name = refName(schema)
  return name === undefined ? schema : asObject(components[name])
}

const isPrimitive = (schema: Json): boolean =>
  schema["enum"] !== undefined ||
  schema["const"] !== undefined ||
  ["string", "number", "integer", "boolean", "null"].includes(String(schema["type"]))

/** The type of a schema as one short phrase. */
export const typeText = (input: unknown, components: Components, depth = 0): string => {
  const schema = asObject(input)
  if (schema === undefined) return "any"
  const name = refName(schema)
  if (name !== undefined) {
    const target = resolve(schema, components)
    // A named primitive (Int, DateFromString) reads as its type; a named object by its name.
    return target !== undefined && isPrimitive(target) && depth < 4 ? typeText(target, components, depth + 1) : name
  }
  if (Array.isArray(schema["enum"])) {
    const values = schema["enum"].map((v) => JSON.stringify(v))
    return values.length > MAX_ENUM ? `${values.slice(0, MAX_ENUM).join(" | ")} | …` : values.join(" | ")
  }
  if (schema["const"] !== undefined) return JSON.stringify(schema["const"])
  const union = (schema["anyOf"] ?? schema["oneOf"]) as ReadonlyArray<unknown> | undefined
  if (Array.isArray(union)) return [...new Set(union.map((s) => typeText(s, components, depth + 1)))].join(" | ")
  if (Array.isArray(schema["allOf"]) && schema["allOf"].length === 1) return typeText(schema["allOf"][0], components, depth + 1)
  switch (schema["type"]) {
    case "array":
      return depth < 4 ? `array of ${typeText(schema["items"], components, depth + 1)}` : "array"
    case "object":
      return "object"
    case undefined:
      return "any"
    default:
      return String(schema["type"])
  }
}

export interface FieldText {
  readonly name: string
  readonly type: string
  readonly required: boolean
}

/** The top-level fields of an object schema (following one `$ref`), or undefined when it is not one object. */
export const fieldsOf = (input: unknown, components: Components): ReadonlyArray<FieldText> | undefined => {
  const raw = asObject(input)
  const schema = raw === undefined ? undefined : resolve(raw, components)
  const properties = schema === undefined ? undefined : asObject(schema["properties"])
  if (schema === undefined || properties === undefined) return undefined
  const required = new Set(Array.isArray(schema["required"]) ? (schema["required"] as ReadonlyArray<string>) : [])
  return Object.entries(properties).map(([name, s]) => ({ name, type: typeText(s, components), required: required.has(name) }))
}

/** `` `name` (type) `` entries, optional ones marked, in one line. */
export const fieldList = (fields: ReadonlyArray<FieldText>): string =>
  fields.map((f) => `\`${f.name}\` (${f.type}${f.required ? "" : ", optional"})`).join(", ")
