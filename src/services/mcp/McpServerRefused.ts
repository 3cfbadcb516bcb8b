import * as Data from "effect/Data"

/** A write the registry refuses: `status` is the HTTP status the API answers with (re-exported by McpServers.ts). */
export class McpServerRefused extends Data.TaggedError("McpServerRefused")<{
  readonly status: 400 | 404 | 409
  readonly message: string
}> {}
