import * as Data from "effect/Data"

/**
 * A command line the CLI refuses before doing anything: printed as `error: <message>`, exit 2.
 * Apart from schema.ts (re-exported there), so that the server's start loads no @effect/cli.
 */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly message: string }> {}
