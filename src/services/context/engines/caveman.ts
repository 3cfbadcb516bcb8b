import * as Schema from "effect/Schema"
import { strict } from "../../../domain/parse.js"
import type { Segment, TextEngine } from "../types.js"
import { de } from "./caveman/de.js"
import { en } from "./caveman/en.js"
import { es } from "./caveman/es.js"
import type { LanguagePack, PhraseRule } from "./caveman/pack.js"

/**
 * caveman: rule-based terse rewriting of prose, one line at a time; code, tables, inline code, tags, URLs, quotes and
 * non-plain words are never touched (docs/compression.md#caveman).
 */

const PACKS: ReadonlyArray<LanguagePack> = [en, es, de]
const PACK_IDS = ["en", "es", "de"] as const

export const Config = Schema.Struct({
  language: Schema.optionalWith(Schema.Literal(...PACK_IDS), { default: () => "en" as const }),
  level: Schema.optionalWith(Schema.Literal("lite", "full", "ultra"), { default: () => "full" as const }),
  roles: Schema.optionalWith(Schema.Array(Schema.Literal("system", "user", "assistant")), {
    default: () => ["user", "system"] as const
  }),
  minChars: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { default: () => 200 }),
  preserveLastTurn: Schema.optionalWith(Schema.Boolean, { default: () => true })
}).annotations(strict)
export type Config = typeof Config.Type

type Family = "politeness" | "filler" | "hedges" | "connectives" | "articles"
const LEVEL_FAMILIES: Record<Config["level"], ReadonlyArray<Family>> = {
  lite: ["politeness", "filler"],
  full: ["politeness", "filler", "hedges", "articles"],
  ultra: ["politeness", "filler", "hedges", "connectives", "articles"]
}
/** The order rules run in: longer phrases first, articles last ("a lot of" before "a"). */
const FAMILY_ORDER: ReadonlyArray<Family> = ["politeness", "filler", "hedges", "connectives", "articles"]

// Private-use characters: a masked span is MASK_OPEN index MASK_CLOSE; CAP marks "capitalise the next word".
const MASK_OPEN = "\uE001"
const MASK_CLOSE = "\uE002"
const CAP = "\uE000"
const PRIVATE = /[\uE000-\uE002]/

/** A rule matches only as a whole plain word: not next to letters, digits or identifier/path punctuation. */
const BEFORE = "(?<![\\p{L}\\p{N}_\\-./\\\\'’@#$%&*+=:~^|<>{}\\[`\\uE001\\uE002])"
const AFTER = "(?![\\p{L}\\p{N}_\\-/\\\\@#$%&*+=~^|<>{}\\]`\\uE001]|[.'’:][^\\s])"

interface CompiledRule {
  readonly id: string
  readonly family: Family
  readonly description: string
  readonly regex: RegExp
  readonly replace: string | undefined
  readonly article: boolean
  readonly start: boolean
}

/** A rule as listed (GET /api/compression/rules): its id and what it does, without its regex. */
const described = (pack: LanguagePack, family: Family, rule: PhraseRule): Pick<CompiledRule, "id" | "family" | "description"> => ({
  id: `${pack.id}.${family}.${rule.id}`,
  family,
  description: rule.replace === undefined ? `drop "${rule.phrase}"` : `"${rule.phrase}" → "${rule.replace}"`
})

const compile = (pack: LanguagePack, family: Family, rule: PhraseRule, article = false): CompiledRule => {
  const body = rule.phrase.replace(/ /g, "\\s+")
  const head = article && pack.relativePronouns ? "(?<!,[ \\t]*)" : ""
  const tail = article ? "(?=[ \\t]+[\\p{L}\\uE001])" : ""
  return {
    ...described(pack, family, rule),
    regex: new RegExp(`${head}${BEFORE}(?:${body})${AFTER}${tail}[ \\t]*`, "giu"),
    replace: rule.replace,
    start: rule.start === true,
    article
  }
}

/** A pack's rules in the order they run, each made by `make` (compiled, or only described). */
const eachRule = <A>(pack: LanguagePack, make: (family: Family, rule: PhraseRule, article: boolean) => A): Array<A> =>
  FAMILY_ORDER.flatMap((family) =>
    family === "articles"
      ? pack.articles.map((word) => make(family, { id: word, phrase: word }, true))
      : pack[family].map((rule) => make(family, rule, false))
  )

const compilePack = (pack: LanguagePack): ReadonlyArray<CompiledRule> =>
  eachRule(pack, (family, rule, article) => compile(pack, family, rule, article))

/** A pack's rules, compiled (a few hundred Unicode regexes, ~25 ms) by the first rewrite that needs them, not at start. */
const compiledPacks = new Map<string, ReadonlyArray<CompiledRule>>()
const compiled = (id: string): ReadonlyArray<CompiledRule> => {
  const pack = PACKS.find((p) => p.id === id) ?? PACKS[0]!
  let rules = compiledPacks.get(pack.id)
  if (rules === undefined) compiledPacks.set(pack.id, (rules = compilePack(pack)))
  return rules
}

/** For GET /api/compression/language-packs. */
export const LANGUAGE_PACKS: ReadonlyArray<{ readonly id: string; readonly name: string; readonly rules: number }> = PACKS.map((p) => ({
  id: p.id,
  name: p.name,
  rules: FAMILY_ORDER.reduce((n, family) => n + (family === "articles" ? p.articles : p[family]).length, 0) + 1
}))

/**
 * For GET /api/compression/rules: every rule of every pack, plus the repetition rule. Described
 * without compiling them: the engines' module lists the rules at import, which compiled every
 * pack's regexes at every start (~75 ms of a start's CPU on a loaded machine).
 */
export const describe = (): ReadonlyArray<{ readonly engine: "caveman"; readonly id: string; readonly description: string }> => [
  { engine: "caveman", id: "repetition", description: "a line or sentence repeated right after itself is kept once" },
  ...PACKS.flatMap((p) =>
    eachRule(p, (family, rule) => described(p, family, rule)).map((r) => ({
      engine: "caveman" as const,
      id: r.id,
      description: `${p.name}, ${r.family}: ${r.description}`
    }))
  )
]

// ---------------------------------------------------------------------------------------------
// Masking: the spans of a line no rule may touch.

const MASKED_SPAN = new RegExp(
  [
    "(`+)[^`]*?\\1", // inline code
    "<!--.*?-->", // HTML comment
    "</?[A-Za-z][\\w:.-]*(?:\\s[^<>]*)?/?>", // XML-ish tag
    "\\b[A-Za-z][A-Za-z0-9+.-]*://[^\\s<>\"'`)\\]]+", // URL
    "\\bwww\\.[^\\s<>\"'`)\\]]+",
    '"[^"\\n]*"', // quoted strings
    "“[^”\\n]*”",
    "„[^“\\n]*“",
    "«[^»\\n]*»",
    "(?<![\\p{L}\\p{N}])'[^'\\n]+'(?![\\p{L}\\p{N}])",
    "(?<![\\p{L}\\p{N}])‘[^’\\n]+’(?![\\p{L}\\p{N}])"
  ].join("|"),
  "gu"
)

/** Identical spans share one placeholder, so a repeated sentence with code in it is still seen as repeated. */
const mask = (content: string, spans: Array<string>): string =>
  content.replace(MASKED_SPAN, (span) => {
    const known = spans.indexOf(span)
    return `${MASK_OPEN}${known === -1 ? spans.push(span) - 1 : known}${MASK_CLOSE}`
  })

const unmask = (content: string, spans: ReadonlyArray<string>): string =>
  content.replace(/\uE001(\d+)\uE002/g, (_, i: string) => spans[Number(i)]!)

// ---------------------------------------------------------------------------------------------
// Rewriting one line's content.

const isSentenceStart = (before: string): boolean => {
  const trimmed = before.replace(/[ \t]+$/, "")
  return trimmed === "" || /(?:[.!?]|\uE000[ \t]*[,;:]?)$/.test(trimmed)
}

const capitalise = (word: string): string => word.charAt(0).toUpperCase() + word.slice(1)
const isUpper = (c: string): boolean => c !== c.toLowerCase() && c === c.toUpperCase()

const applyRule = (content: string, rule: CompiledRule): string =>
  content.replace(rule.regex, (...args: Array<any>) => {
    // The phrase's own groups come between the match and (offset, whole string).
    const match = args[0] as string
    const offset = args[args.length - 2] as number
    const whole = args[args.length - 1] as string
    const first = match.charAt(0) === "¿" ? match.charAt(1) : match.charAt(0)
    const word = match.match(/^[¿]?[\p{L}']+/u)?.[0] ?? ""
    // An ALL-CAPS word is a name or a constant, not prose.
    if (word.length > 1 && word === word.toUpperCase() && word !== word.toLowerCase() && word !== "I") return match
    const start = isSentenceStart(whole.slice(0, offset))
    if (rule.start && !start) return match
    const capital = isUpper(first) && !/^I\b/u.test(match)
    // A capitalised word inside a sentence is a name ("Plan A", "The Matrix"): left alone.
    if (capital && !start) return match
    const trailing = match.match(/[ \t]*$/)![0]
    if (rule.replace !== undefined) return (capital ? capitalise(rule.replace) : rule.replace) + (trailing || "")
    return capital || (start && /^I\b/u.test(match)) ? CAP : ""
  })

/** Capitalises a plain lowercase word after a CAP mark (a dropped sentence start); never an identifier. */
const resolveCaps = (content: string): string =>
  content.replace(
    /\uE000+[ \t]*(?:[,;:][ \t]*)?(?:([¿¡]?)(\p{Ll}[\p{Ll}'’]*)(?=$|[\s,;:!?)]|\.(?:\s|$)))?/gu,
    (_, mark: string | undefined, word: string | undefined) => (word === undefined ? "" : (mark ?? "") + capitalise(word))
  )

/** Tidies what dropping words leaves: doubled spaces, spaces before punctuation, orphan commas. */
const tidy = (content: string): string =>
  content
    .replace(/[ \t]{2,}/g, " ")
    .replace(/[ \t]+(?=[,.;:!?)]+(?:\s|$))/g, "")
    .replace(/,(?=[ \t]*[.;:!?](?:\s|$))/g, "")
    .replace(/,[ \t]*,/g, ",")
    .replace(/^[ \t]*[,;:][ \t]*/, "")
    .replace(/([.!?])[ \t]+,[ \t]*/g, "$1 ")
    .replace(/[ \t]+$/, "")
    .replace(/^[ \t]+/, "")

/** Drops a sentence identical to the one right before it. */
const dedupeSentences = (content: string): string => {
  const sentences = content.split(/(?<=[.!?])[ \t]+/)
  if (sentences.length < 2) return content
  const kept: Array<string> = []
  for (const s of sentences) if (kept.length === 0 || kept[kept.length - 1] !== s) kept.push(s)
  return kept.length === sentences.length ? content : kept.join(" ")
}

const rewriteContent = (content: string, rules: ReadonlyArray<CompiledRule>): string => {
  const spans: Array<string> = []
  let text = mask(content, spans)
  const original = text
  // Until nothing changes, so applying the engine twice answers what applying it once does.
  for (let round = 0; round < 8; round++) {
    let next = text
    for (const rule of rules) next = applyRule(next, rule)
    next = dedupeSentences(tidy(resolveCaps(next)))
    if (next === text) break
    text = next
  }
  if (text === original) return content
  // Only punctuation left (a line that was all politeness): nothing.
  if (/^[\s\p{P}]*$/u.test(text)) return ""
  return unmask(text, spans)
}

// ---------------------------------------------------------------------------------------------
// Lines: fences, prefixes, repetition.

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/
const LINE_PREFIX = /^([ \t]*(?:>[ \t]*)*(?:#{1,6}[ \t]+|[-*+][ \t]+(?:\[[ xX]\][ \t]+)?|\d{1,9}[.)][ \t]+)?)/
const LIST_ITEM = /^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]/
const isProtectedLine = (line: string): boolean => /^[ \t]*\|/.test(line) || (/^(?:\t| {4})/.test(line) && !LIST_ITEM.test(line))

const rewrite = (text: string, rules: ReadonlyArray<CompiledRule>): string => {
  const lines = text.split("\n")
  const out: Array<string> = []
  let fence: string | undefined
  let lastProse: string | undefined // the last prose line kept, for repetition
  let dropped = false
  for (const raw of lines) {
    if (fence !== undefined) {
      out.push(raw)
      if (new RegExp(`^ {0,3}${fence.charAt(0) === "`" ? "`" : "~"}{${fence.length},}[ \\t]*\\r?$`).test(raw)) fence = undefined
      lastProse = undefined
      continue
    }
    const open = FENCE_OPEN.exec(raw)
    if (open) {
      fence = open[1]!
      out.push(raw)
      lastProse = undefined
      continue
    }
    const cr = raw.endsWith("\r") ? "\r" : ""
    const line = cr ? raw.slice(0, -1) : raw
    if (line.trim() === "") {
      // A blank line after a dropped line, when a blank line comes before it too: one blank line is enough.
      if (!(dropped && out.length > 0 && out[out.length - 1]!.trim() === "")) out.push(raw)
      dropped = false
      lastProse = undefined
      continue
    }
    dropped = false
    if (isProtectedLine(line) || PRIVATE.test(line)) {
      out.push(raw)
      lastProse = undefined
      continue
    }
    const prefix = LINE_PREFIX.exec(line)![1]!
    const content = line.slice(prefix.length)
    const rewritten = content === "" ? content : rewriteContent(content, rules)
    if (rewritten === "" && content !== "") {
      dropped = true
      continue
    }
    const next = prefix + rewritten + cr
    // Repeated prose is dropped; a repeated "}" or "end" (code pasted without a fence) is not prose.
    if (next === lastProse && (content.match(/\p{L}{2,}/gu)?.length ?? 0) >= 3) continue
    out.push(next)
    lastProse = next
  }
  return out.join("\n")
}

const allowed = (segment: Segment, config: Config): boolean =>
  segment.kind === "prose" &&
  segment.role !== "tool" &&
  (config.roles as ReadonlyArray<string>).includes(segment.role) &&
  // A system prompt is never the last turn: where the format keeps it beside the conversation (Anthropic
  // `system`, Gemini `systemInstruction`, Responses `instructions`) it is "turn 0", the last one of a
  // one-message conversation; kept there and rewritten from the second request on, the conversation's
  // prefix would change between its first and second request and the upstream prompt cache would miss.
  !(config.preserveLastTurn && segment.role !== "system" && segment.turn === segment.turns - 1)

export const caveman: TextEngine<Config> = {
  id: "caveman",
  description:
    "Terse rewriting of prose: drops politeness, filler, hedges and articles, collapses repetition; never code, identifiers, paths, numbers, URLs or quotes",
  applies: (segment) => segment.kind === "prose" && segment.role !== "tool",
  apply: (text, segment, config) => {
    if (text.length < config.minChars || !allowed(segment, config)) return text
    const rules = compiled(config.language).filter((r) => LEVEL_FAMILIES[config.level].includes(r.family))
    return rewrite(text, rules)
  }
}
