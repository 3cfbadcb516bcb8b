import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { BadRequest } from "./errors.js"

/** Annotation for request payloads: an unknown field is a 400 that names it, not silently dropped. */
export const strict = { parseOptions: { onExcessProperty: "error" as const } }

/**
 * The management plane's one wording of schema failures, whoever decoded (a handler, the CLI,
 * or the HttpApi itself, whose `HttpApiDecodeError` carries the same issues): one line per
 * field, its first problem, `messages.0.role: is missing; priority: expected number, actual "high"`.
 */
export const describeIssues = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>): string => {
  const seen = new Set<string>()
  const parts: Array<string> = []
  for (const issue of issues) {
    const where = issue.path.map(String).join(".")
    if (seen.has(where)) continue
    seen.add(where)
    const message = issue.message.replace(/^Expected /, "expected ")
    parts.push(where ? `${where}: ${message}` : message)
  }
  return parts.join("; ")
}

export const describeParseError = (error: ParseResult.ParseError): string => describeIssues(ParseResult.ArrayFormatter.formatErrorSync(error))

/** A payload that does not decode, as the management plane answers it: a 400 `BadRequest`. */
export const badRequestOf = (error: ParseResult.ParseError): BadRequest => new BadRequest({ message: describeParseError(error) })

/** Decodes unknown input with `schema`; a failure is the 400 of `badRequestOf`. */
export const decodeOrBadRequest =
  <A, I>(schema: Schema.Schema<A, I>) =>
  (input: unknown): Effect.Effect<A, BadRequest> =>
    Effect.mapError(Schema.decodeUnknown(schema)(input), badRequestOf)

/**
 * A string that must be one of `values`: one readable message listing them (a Literal union
 * would report every member separately).
 */
export const oneOf = <const T extends string>(values: ReadonlyArray<T>, field: string) =>
  Schema.String.pipe(
    Schema.filter((s): s is T => (values as ReadonlyArray<string>).includes(s), {
      message: (issue) => `${field} must be one of: ${values.join(", ")} (got ${JSON.stringify(issue.actual)})`
    })
  )
