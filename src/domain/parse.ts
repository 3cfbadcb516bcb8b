import * as ParseResult from "effect/ParseResult"

/** One readable line per problem: `messages.0.role: is missing`. */
export const describeParseError = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => {
      const where = issue.path.map(String).join(".")
      const message = issue.message.replace(/^Expected /, "expected ")
      return where ? `${where}: ${message}` : message
    })
    .join("; ")
