/**
 * The text engines the Compression service runs, by id, each with its settings schema (decoded
 * strictly: an unknown field or a bad value is an error naming it) and its rules for
 * `GET /api/compression/rules`. `summarize` is not a text engine (it rewrites the conversation,
 * not a piece of text) and is not in this build yet: a combo cannot name it.
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { describeParseError } from "../../../domain/parse.js"
import type { EngineId, TextEngine } from "../types.js"
import * as caveman from "./caveman.js"
import * as json from "./json.js"
import * as rtk from "./rtk.js"
import * as whitespace from "./whitespace.js"

export interface Rule {
  readonly engine: string
  readonly id: string
  readonly description: string
}

export interface EngineEntry {
  readonly engine: TextEngine<any>
  /** Settings from JSON: the decoded settings, or a message naming what is wrong. */
  readonly decode: (input: unknown) => Either.Either<unknown, string>
  /** Decoded settings back to JSON (every field, defaults included). */
  readonly encode: (config: unknown) => unknown
  readonly rules: () => ReadonlyArray<Rule>
}

const entry = <A, I>(engine: TextEngine<A>, schema: Schema.Schema<A, I>, rules: () => ReadonlyArray<Rule>): EngineEntry => {
  const decode = ParseResult.decodeUnknownEither(schema, { onExcessProperty: "error", errors: "all" })
  const encode = Schema.encodeSync(schema)
  return {
    engine,
    decode: (input) => Either.mapLeft(decode(input), (e) => describeParseError(new ParseResult.ParseError({ issue: e }))),
    encode: (config) => encode(config as A),
    rules
  }
}

/**
 * Tools whose result is a file's content as the agent asked to read it: rtk leaves them whole
 * (a coding agent edits from what it read; a cut file makes wrong edits, and the agent cannot
 * fetch the raw output). Compared without case.
 */
export const FILE_READ_TOOLS = new Set([
  "read",
  "read_file",
  "readfile",
  "read_many_files",
  "view",
  "open_file",
  "get_file",
  "cat_file",
  "str_replace_based_edit_tool"
])

const rtkEngine: TextEngine<rtk.RtkConfig> = {
  ...rtk.rtk,
  applies: (segment) =>
    rtk.rtk.applies(segment) &&
    !(segment.toolName !== undefined && segment.command === undefined && FILE_READ_TOOLS.has(segment.toolName.toLowerCase()))
}

export const ENGINES: ReadonlyMap<EngineId, EngineEntry> = new Map<EngineId, EngineEntry>([
  ["rtk", entry(rtkEngine, rtk.RtkConfig, rtk.describe)],
  ["json", entry(json.json, json.Config, json.describe)],
  ["whitespace", entry(whitespace.whitespace, whitespace.Config, whitespace.describe)],
  ["caveman", entry(caveman.caveman, caveman.Config, caveman.describe)]
])

export const LANGUAGE_PACKS = caveman.LANGUAGE_PACKS

export const RULES: ReadonlyArray<Rule> = [...ENGINES.values()].flatMap((e) => e.rules())

export { rtk }
