/**
 * Type and range checks of the request parameters each client format knows; the first bad value throws a RequestDecodeError naming
 * the field. Hand-written on purpose: it runs on every request (docs/formats.md, "Request validation").
 */
import { RequestDecodeError } from "./format.js"

/** One known parameter: what it must be (`expected ...`) and the test. */
export interface Param {
  readonly key: string
  readonly expected: string
  readonly ok: (v: unknown) => boolean
}

type Rule = Omit<Param, "key">

const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v)

export const number = (min?: number, max?: number): Rule => ({
  expected:
    min !== undefined && max !== undefined
      ? `a number between ${min} and ${max}`
      : min !== undefined
        ? `a number of at least ${min}`
        : "a number",
  ok: (v) => isNumber(v) && (min === undefined || v >= min) && (max === undefined || v <= max)
})

export const integer = (min?: number, max?: number): Rule => ({
  expected:
    min === 1 && max === undefined
      ? "a positive integer"
      : min !== undefined && max !== undefined
        ? `an integer between ${min} and ${max}`
        : min !== undefined
          ? `an integer of at least ${min}`
          : "an integer",
  ok: (v) => Number.isInteger(v) && (min === undefined || (v as number) >= min) && (max === undefined || (v as number) <= max)
})

export const boolean: Rule = { expected: "a boolean", ok: (v) => typeof v === "boolean" }
export const string: Rule = { expected: "a string", ok: (v) => typeof v === "string" }
export const array: Rule = { expected: "an array", ok: Array.isArray }
export const object: Rule = { expected: "an object", ok: (v) => typeof v === "object" && v !== null && !Array.isArray(v) }
export const stringOrObject: Rule = { expected: "a string or an object", ok: (v) => typeof v === "string" || object.ok(v) }
export const stringOrArray: Rule = { expected: "a string or an array", ok: (v) => typeof v === "string" || Array.isArray(v) }
export const strings: Rule = { expected: "an array of strings", ok: (v) => Array.isArray(v) && v.every((s) => typeof s === "string") }
export const stringOrStrings: Rule = { expected: "a string or an array of strings", ok: (v) => typeof v === "string" || strings.ok(v) }
export const oneOf = (...values: ReadonlyArray<string>): Rule => ({
  expected: values.map((v) => JSON.stringify(v)).join(" or "),
  ok: (v) => typeof v === "string" && values.includes(v)
})
export const either = (a: Rule, b: Rule): Rule => ({ expected: `${a.expected} or ${b.expected}`, ok: (v) => a.ok(v) || b.ok(v) })

/** The known parameters of a body, from `{ key: rule }`. */
export const params = (rules: Readonly<Record<string, Rule>>): ReadonlyArray<Param> =>
  Object.entries(rules).map(([key, rule]) => ({ key, ...rule }))

/** A value as the error message quotes it: JSON, cut short. */
const shown = (v: unknown): string => {
  const text = JSON.stringify(v) ?? String(v)
  return text.length > 60 ? `${text.slice(0, 57)}...` : text
}

/** The error for a bad (or missing) field; `field` is its path as the client spelled it. */
export const invalidParam = (field: string, expected: string, v: unknown): RequestDecodeError =>
  new RequestDecodeError(
    v === undefined ? `${field}: Field required, expected ${expected}` : `${field}: expected ${expected}, got ${shown(v)}`,
    field
  )

/** Throws for the first known parameter of `body` with a bad value; `prefix` is the path of `body` (`generationConfig.`). */
export const checkParams = (body: Readonly<Record<string, unknown>>, known: ReadonlyArray<Param>, prefix = ""): void => {
  for (let i = 0; i < known.length; i++) {
    const p = known[i]!
    const v = body[p.key]
    if (v !== undefined && v !== null && !p.ok(v)) throw invalidParam(prefix + p.key, p.expected, v)
  }
}

/** Throws unless `body[key]` is present (not null) and passes `rule`. */
export const requireParam = (body: Readonly<Record<string, unknown>>, key: string, rule: Rule, prefix = ""): void => {
  const v = body[key]
  if (v === undefined || v === null) throw invalidParam(prefix + key, rule.expected, undefined)
  if (!rule.ok(v)) throw invalidParam(prefix + key, rule.expected, v)
}
