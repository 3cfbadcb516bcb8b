import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import { BadRequest } from "./errors.js"

/** Annotation for request payloads: an unknown field is a 400 that names it, not silently dropped. */
export const strict = { parseOptions: { onExcessProperty: "error" as const } }

/**
 * The management plane's one wording of schema failures, whoever decoded (a handler, the CLI,
 * or the HttpApi itself, whose `HttpApiDecodeError` carries the same issues): one line per
 * field, its first problem (a union of literals: every choice), `messages.0.role: is missing;
 * priority: expected number, actual "high"; tone: expected "neutral" | "concise", actual "angry"`.
 */
export const describeIssues = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>): string => {
  const byPath = new Map<string, Array<string>>()
  for (const issue of issues) {
    const where = issue.path.map(String).join(".")
    const list = byPath.get(where) ?? []
    list.push(issue.message)
    byPath.set(where, list)
  }
  const parts: Array<string> = []
  for (const [where, messages] of byPath) {
    // A union of literals (`"a" | "b"`) fails once per member: said once, with every choice.
    // (An optional field's `undefined` branch is left out of the choices.)
    const each = messages.map((m) => /^Expected ("[^"]*"|undefined), actual (.+)$/s.exec(m))
    const first = each[0]
    const choices = [...new Set(each.map((m) => m?.[1]))].filter((c) => c !== undefined && c !== "undefined")
    const message =
      messages.length > 1 && first && choices.length > 1 && each.every((m) => m !== null && m[2] === first[2])
        ? `expected ${choices.join(" | ")}, actual ${first[2]}`
        : messages[0]!.replace(/^Expected /, "expected ")
    parts.push(where ? `${where}: ${message}` : message)
  }
  return parts.join("; ")
}

export const describeParseError = (error: ParseResult.ParseError): string =>
  describeIssues(ParseResult.ArrayFormatter.formatErrorSync(error))

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

/**
 * A struct whose fields have defaults, refusing unknown fields on both sides of its
 * transformation (the encoded body as sent and the document it becomes).
 */
export const strictStruct = <F extends Schema.Struct.Fields>(fields: F): Schema.Schema<Schema.Struct.Type<F>, Schema.Struct.Encoded<F>> => {
  const ast = Schema.Struct(fields).ast
  const options = { [SchemaAST.ParseOptionsAnnotationId]: strict.parseOptions }
  if (ast._tag !== "Transformation") return Schema.make(SchemaAST.annotations(ast, options))
  return Schema.make(
    new SchemaAST.Transformation(
      SchemaAST.annotations(ast.from, options),
      SchemaAST.annotations(ast.to, options),
      ast.transformation,
      options
    )
  )
}
