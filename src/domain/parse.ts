import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

/** Annotation for request payloads: an unknown field is a 400 that names it, not silently dropped. */
export const strict = { parseOptions: { onExcessProperty: "error" as const } }

/** One readable line per problem: `messages.0.role: is missing`. */
export const describeParseError = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => {
      const where = issue.path.map(String).join(".")
      const message = issue.message.replace(/^Expected /, "expected ")
      return where ? `${where}: ${message}` : message
    })
    .join("; ")

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
