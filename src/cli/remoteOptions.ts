import * as Options from "@effect/cli/Options"

/**
 * Options of commands that operate a running server. A module of their own, importing nothing
 * heavy, so a command can declare them and load its client only when it runs.
 */
export const remoteOptions = {
  url: Options.text("url").pipe(Options.withDescription("Server address (default http://127.0.0.1:<port>)."), Options.optional),
  apiKey: Options.text("api-key").pipe(Options.withDescription("Admin API key (default GATEWAY_API_KEY)."), Options.optional)
}
