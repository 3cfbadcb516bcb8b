import * as Args from "@effect/cli/Args"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { describeIssues } from "../domain/parse.js"
import { UsageError } from "./usageError.js"

/**
 * Options and arguments decoded by the API's own schemas (src/domain), so that the CLI rejects
 * what the management API would, before any request, in the API's words, naming the flag:
 * `gateway keys add --rpm 0` says `--rpm: a rate limit must be an integer from 1 to ...`, as
 * `POST /api/keys {"rpm":0}` answers `rpm: a rate limit must be ...`. Light: schemas only.
 */

export { UsageError }

/**
 * `schema`, its failure one line that names `subject` (`--rpm`, `<id>`), worded like the
 * management plane's 400s (`describeIssues`).
 */
export const named = <A, I>(subject: string, schema: Schema.Schema<A, I>): Schema.Schema<A, I> =>
  Schema.declare([schema], {
    decode: (inner) => (input, options, ast) =>
      Effect.mapError(
        ParseResult.decodeUnknown(inner)(input, options),
        (issue) => new ParseResult.Type(ast, input, `${subject}: ${describeIssue(issue)}`)
      ),
    encode: (inner) => (input, options, ast) =>
      Effect.mapError(
        ParseResult.encodeUnknown(inner)(input, options),
        (issue) => new ParseResult.Type(ast, input, `${subject}: ${describeIssue(issue)}`)
      )
  })

/** The API's wording; a leading index (which of several `--target`s) is left out. */
const describeIssue = (issue: ParseResult.ParseIssue): string =>
  describeIssues(
    ParseResult.ArrayFormatter.formatIssueSync(issue).map((i) => (typeof i.path[0] === "number" ? { ...i, path: i.path.slice(1) } : i))
  )

/** `--name <value>` decoded by `schema` (whose encoded side is the text given). */
export const schemaOption = <A, I extends string>(name: string, schema: Schema.Schema<A, I>): Options.Options<A> =>
  Options.text(name).pipe(Options.withSchema(named(`--${name}`, schema)))

/** `--name <value>`, repeatable, each value decoded by `schema`. */
export const schemaOptions = <A, I extends string>(name: string, schema: Schema.Schema<A, I>): Options.Options<Array<A>> =>
  Options.text(name).pipe(Options.repeated, Options.withSchema(named(`--${name}`, Schema.mutable(Schema.Array(schema)))))

/** A positional `<name>` decoded by `schema`. */
export const schemaArg = <A, I extends string>(name: string, schema: Schema.Schema<A, I>): Args.Args<A> =>
  Args.text({ name }).pipe(Args.withSchema(named(`<${name}>`, schema)))

/** A whole number given as text, then checked by `schema` (an API field's range). */
export const intFromText = <A>(schema: Schema.Schema<A, number>): Schema.Schema<A, string> =>
  Schema.compose(Schema.NumberFromString, schema)

/**
 * Decodes input assembled from several options against an API payload schema (rules that span
 * fields); a failure is a UsageError naming the flags: `flags` maps payload fields to them.
 */
export const decodeInput =
  <A, I>(schema: Schema.Schema<A, I>, flags: Readonly<Record<string, string>> = {}) =>
  (input: unknown): Effect.Effect<A, UsageError> =>
    Effect.mapError(
      Schema.decodeUnknown(schema)(input),
      (e) =>
        new UsageError({
          message: describeIssues(
            ParseResult.ArrayFormatter.formatErrorSync(e).map((i) => {
              const [head, ...rest] = i.path
              return typeof head === "string" && flags[head] ? { ...i, path: [flags[head], ...rest] } : i
            })
          )
        })
    )
