/**
 * The JSON Schema subset the `json-schema` grader checks (docs/guardrails.md, "Evals"): `type`
 * (one or a list), `properties`, `required`, `additionalProperties: false`, `items`, `enum`,
 * `const`, `minimum`, `maximum`, `minLength`, `maxLength`, `pattern`, `minItems`, `maxItems`.
 * Other keywords are ignored. Answers the first violation, or undefined.
 */
type Schema = Record<string, unknown>
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

const typeOf = (v: unknown): string =>
  v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "number" ? (Number.isInteger(v) ? "integer" : "number") : typeof v

export const violation = (schema: Schema, value: unknown, path = "$"): string | undefined => {
  const types =
    schema["type"] === undefined ? undefined : Array.isArray(schema["type"]) ? (schema["type"] as Array<string>) : [String(schema["type"])]
  if (types) {
    const t = typeOf(value)
    if (!types.includes(t) && !(t === "integer" && types.includes("number"))) return `${path}: expected ${types.join(" or ")}, got ${t}`
  }
  if (Array.isArray(schema["enum"]) && !schema["enum"].some((e) => JSON.stringify(e) === JSON.stringify(value)))
    return `${path}: not one of the enum values`
  if ("const" in schema && JSON.stringify(schema["const"]) !== JSON.stringify(value))
    return `${path}: expected ${JSON.stringify(schema["const"])}`
  if (typeof value === "number") {
    if (typeof schema["minimum"] === "number" && value < schema["minimum"]) return `${path}: below ${schema["minimum"]}`
    if (typeof schema["maximum"] === "number" && value > schema["maximum"]) return `${path}: above ${schema["maximum"]}`
  }
  if (typeof value === "string") {
    if (typeof schema["minLength"] === "number" && value.length < schema["minLength"]) return `${path}: shorter than ${schema["minLength"]}`
    if (typeof schema["maxLength"] === "number" && value.length > schema["maxLength"]) return `${path}: longer than ${schema["maxLength"]}`
    if (typeof schema["pattern"] === "string" && !new RegExp(schema["pattern"], "u").test(value))
      return `${path}: does not match ${schema["pattern"]}`
  }
  if (Array.isArray(value)) {
    if (typeof schema["minItems"] === "number" && value.length < schema["minItems"])
      return `${path}: fewer than ${schema["minItems"]} items`
    if (typeof schema["maxItems"] === "number" && value.length > schema["maxItems"]) return `${path}: more than ${schema["maxItems"]} items`
    if (isObject(schema["items"])) {
      for (let i = 0; i < value.length; i++) {
        const v = violation(schema["items"], value[i], `${path}[${i}]`)
        if (v) return v
      }
    }
  }
  if (isObject(value)) {
    for (const k of Array.isArray(schema["required"]) ? (schema["required"] as Array<string>) : [])
      if (!(k in value)) return `${path}: missing property '${k}'`
    const props = isObject(schema["properties"]) ? schema["properties"] : {}
    for (const k in value) {
      const sub = props[k]
      if (isObject(sub)) {
        const v = violation(sub, value[k], `${path}.${k}`)
        if (v) return v
      } else if (schema["additionalProperties"] === false) return `${path}: unexpected property '${k}'`
    }
  }
  return undefined
}
