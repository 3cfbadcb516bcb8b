import * as Options from "@effect/cli/Options"
import * as Schema from "effect/Schema"
import { schemaOption } from "./schema.js"

/** `--json` of every command whose output is data (the root `--json` turns it on too). */
export const json = Options.boolean("json").pipe(Options.withDescription("Print JSON (also: gateway --json <command>)."))

/** An http(s) address of a running gateway. */
export const ServerUrl = Schema.Trim.pipe(
  Schema.filter((s) => {
    try {
      const u = new URL(s)
      return u.protocol === "http:" || u.protocol === "https:" ? true : "must be an http:// or https:// address"
    } catch {
      return `${JSON.stringify(s)} is not a URL`
    }
  }),
  Schema.transform(Schema.String, { strict: true, decode: (s) => s.replace(/\/+$/, ""), encode: (s) => s })
)

/** Options of commands that operate a running server. */
export const remoteOptions = {
  url: schemaOption("url", ServerUrl).pipe(Options.withDescription("Server address (default http://127.0.0.1:<port>)."), Options.optional),
  apiKey: Options.text("api-key").pipe(Options.withDescription("Admin API key (default GATEWAY_API_KEY)."), Options.optional)
}
