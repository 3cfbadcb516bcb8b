/**
 * A project's own rtk filter file: a JSON list of filters (or `{ "filters": [...] }`), each of the
 * built-ins' shape. Validated before use: every regex must compile, be at most 500 characters and,
 * unless the operator trusts project filters (`GATEWAY_RTK_TRUST_PROJECT_FILTERS`), have no shape
 * that backtracks catastrophically (nested quantifiers, backreferences). Ids must be unique and
 * must not reuse a built-in id (disable the built-in and add one under a new id instead).
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { BUILTIN_FILTER_IDS } from "./builtins.js"
import { FilterSpec, TrustedFilterSpec } from "./filter.js"

export const MAX_PROJECT_FILTERS = 100

export type ProjectFiltersResult =
  | { readonly ok: true; readonly filters: ReadonlyArray<FilterSpec> }
  | { readonly ok: false; readonly errors: ReadonlyArray<string> }

const list = (spec: typeof FilterSpec | typeof TrustedFilterSpec) => Schema.Array(spec)
const safeList = list(FilterSpec)
const trustedList = list(TrustedFilterSpec)

const pathOf = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((acc, key) => (typeof key === "number" ? `${acc}[${key}]` : acc ? `${acc}.${String(key)}` : String(key)), "")

/** Duplicate ids, and ids taken by a built-in filter. */
export const idProblems = (filters: ReadonlyArray<{ readonly id: string }>, prefix = ""): Array<string> => {
  const errors: Array<string> = []
  const seen = new Set<string>()
  filters.forEach((f, i) => {
    if (BUILTIN_FILTER_IDS.includes(f.id)) errors.push(`${prefix}[${i}].id: "${f.id}" is a built-in filter id`)
    else if (seen.has(f.id)) errors.push(`${prefix}[${i}].id: "${f.id}" is used by another filter`)
    seen.add(f.id)
  })
  return errors
}

/** Validates a project's filter file (already parsed from JSON): the filters, or one error per bad field. */
export const parseProjectFilters = (json: unknown, trusted: boolean): ProjectFiltersResult => {
  let items: unknown = json
  let prefix = ""
  if (json !== null && typeof json === "object" && !Array.isArray(json)) {
    const keys = Object.keys(json)
    const extra = keys.filter((k) => k !== "filters")
    if (extra.length > 0 || !("filters" in json)) {
      return {
        ok: false,
        errors:
          extra.length > 0
            ? extra.map((k) => `${k}: unknown field (a filter file is a list of filters or { "filters": [...] })`)
            : ["filters: is missing"]
      }
    }
    items = (json as { filters: unknown }).filters
    prefix = "filters"
  }
  if (!Array.isArray(items)) return { ok: false, errors: [`${prefix || "filters"}: expected a list of filters`] }
  if (items.length > MAX_PROJECT_FILTERS) return { ok: false, errors: [`${prefix || "filters"}: at most ${MAX_PROJECT_FILTERS} filters`] }
  const decoded = Schema.decodeUnknownEither(trusted ? trustedList : safeList)(items, { errors: "all", onExcessProperty: "error" })
  if (Either.isLeft(decoded)) {
    const seen = new Set<string>()
    const errors: Array<string> = []
    for (const issue of ParseResult.ArrayFormatter.formatErrorSync(decoded.left)) {
      const where = `${prefix}${pathOf(issue.path).replace(/^(?=[^[])/, prefix ? "." : "")}`
      const line = `${where}: ${issue.message}`
      if (seen.has(line)) continue
      seen.add(line)
      errors.push(line)
    }
    return { ok: false, errors }
  }
  const problems = idProblems(decoded.right, prefix)
  if (problems.length > 0) return { ok: false, errors: problems }
  return { ok: true, filters: decoded.right }
}
