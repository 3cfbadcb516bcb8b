/**
 * Policy rules compiled for the request path (docs/guardrails.md): globs as regular expressions,
 * blocked terms lower-cased, and the checks as plain synchronous functions over the client's
 * JSON body. policyHook.ts keeps the compiled snapshot and turns the findings into verdicts.
 */
import type { FormatId } from "../../domain/canonical.js"
import type { PolicyView } from "../../domain/policies.js"

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/** `*` any run of characters, `?` one; everything else literal; case-insensitive, whole string. */
export const patternToRegExp = (pattern: string): RegExp =>
  new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, "\\$&")
      .replace(/\*/g, ".*")
      .replace(/\?/g, ".")}$`,
    "i"
  )

export interface Matcher {
  readonly pattern: string
  readonly re: RegExp
}
const matchers = (patterns: ReadonlyArray<string> | undefined | null): ReadonlyArray<Matcher> | undefined =>
  patterns && patterns.length > 0 ? patterns.map((pattern) => ({ pattern, re: patternToRegExp(pattern) })) : undefined
export const firstMatch = (list: ReadonlyArray<Matcher>, value: string): Matcher | undefined => list.find((m) => m.re.test(value))

export interface CompiledPolicy {
  readonly view: PolicyView
  /** `policy "name" v3`: how refusals and warnings name it. */
  readonly label: string
  readonly toolAllow: ReadonlyArray<Matcher> | undefined
  readonly toolDeny: ReadonlyArray<Matcher> | undefined
  readonly models: ReadonlyMap<string, ReadonlyArray<Matcher>> | undefined
  readonly maxTokens: number | undefined
  readonly maxCostUsd: number | undefined
  readonly terms: ReadonlyArray<string> | undefined
}

export const compile = (view: PolicyView): CompiledPolicy => ({
  view,
  label: `policy "${view.name}" v${view.version}`,
  toolAllow: matchers(view.tools?.allow),
  toolDeny: matchers(view.tools?.deny),
  models: view.models ? new Map(Object.entries(view.models).map(([k, v]) => [k, matchers(v) ?? []])) : undefined,
  maxTokens: view.maxTokens ?? undefined,
  maxCostUsd: view.maxCostUsd ?? undefined,
  terms: view.blockedTerms && view.blockedTerms.length > 0 ? view.blockedTerms.map((t) => t.toLowerCase()) : undefined
})

/** A rule a request broke: which policy, which rule, what. */
export interface Finding {
  readonly policy: CompiledPolicy
  /** `tools.deny`, `tools.allow`, `models`, `maxTokens`, `maxCostUsd`, `blockedTerms[2]`. */
  readonly rule: string
  readonly message: string
}

export const describeFinding = (f: Finding): string => `${f.policy.label}, rule ${f.rule}: ${f.message}`

/** Why a tool is not allowed by `p`, or undefined. Deny wins over allow. */
export const toolVerdict = (p: CompiledPolicy, name: string): Finding | undefined => {
  const denied = p.toolDeny && firstMatch(p.toolDeny, name)
  if (denied) return { policy: p, rule: "tools.deny", message: `tool "${name}" is denied (matches "${denied.pattern}")` }
  if (p.toolAllow && !firstMatch(p.toolAllow, name))
    return { policy: p, rule: "tools.allow", message: `tool "${name}" is not in the allow list` }
  return undefined
}

/** Every string value of a JSON body, depth-first (the body was parsed under the depth limit). */
const eachString = (v: unknown, visit: (s: string) => boolean): boolean => {
  if (typeof v === "string") return visit(v)
  if (Array.isArray(v)) {
    for (const x of v) if (eachString(x, visit)) return true
    return false
  }
  if (isObject(v)) {
    for (const k in v) if (eachString(v[k], visit)) return true
  }
  return false
}

/** The first blocked term of `p` in any text of the body (tool-call arguments included). */
export const termFinding = (p: CompiledPolicy, body: Json): Finding | undefined => {
  const terms = p.terms
  if (!terms) return undefined
  let found = -1
  eachString(body, (s) => {
    const lower = s.toLowerCase()
    for (let i = 0; i < terms.length; i++) {
      if (lower.includes(terms[i]!)) {
        found = i
        return true
      }
    }
    return false
  })
  return found < 0 ? undefined : { policy: p, rule: `blockedTerms[${found}]`, message: "the request contains a blocked term" }
}

/** Characters of text in the body (a token estimate is this over 4). */
export const textLength = (body: Json): number => {
  let n = 0
  eachString(body, (s) => {
    n += s.length
    return false
  })
  return n
}

/** Where each format asks for its output cap: the field's path in the body. */
const OUTPUT_CAP: Record<FormatId, ReadonlyArray<ReadonlyArray<string>>> = {
  "openai-chat": [["max_completion_tokens"], ["max_tokens"]],
  "openai-responses": [["max_output_tokens"]],
  anthropic: [["max_tokens"]],
  gemini: [
    ["generationConfig", "maxOutputTokens"],
    ["generation_config", "max_output_tokens"]
  ],
  ollama: [["options", "num_predict"]]
}

const at = (body: Json, path: ReadonlyArray<string>): unknown => {
  let v: unknown = body
  for (const k of path) v = isObject(v) ? v[k] : undefined
  return v
}

/** The output tokens the request asks for at most, if it says. */
export const requestedOutput = (format: FormatId, body: Json): number | undefined => {
  for (const path of OUTPUT_CAP[format]) {
    const v = at(body, path)
    if (typeof v === "number" && Number.isFinite(v) && v > 0) return v
  }
  return undefined
}

/** The body with its output cap set to `cap` (in the format's first field: `max_tokens` for chat, which every compatible upstream reads).
 * */
export const withOutputCap = (format: FormatId, body: Json, cap: number): Json => {
  const path = format === "openai-chat" ? ["max_tokens"] : OUTPUT_CAP[format][0]!
  if (path.length === 1) return { ...body, [path[0]!]: cap }
  const parent = isObject(body[path[0]!]) ? (body[path[0]!] as Json) : {}
  return { ...body, [path[0]!]: { ...parent, [path[1]!]: cap } }
}
