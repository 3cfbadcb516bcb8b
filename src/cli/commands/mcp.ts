import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { own, type Parsed } from "../handler.js"
import { json, remoteOptions } from "../options.js"
import { serversCommand } from "./mcpServers.js"

// Light on purpose: the management client (and the API contract under it) loads when a command runs.
const loaded = Effect.promise(() =>
  Promise.all([import("../remote.js"), import("../output.js"), import("@effect/platform/FetchHttpClient")])
)

const statusOptions = { ...remoteOptions, json }
const status = Command.make(
  "status",
  statusOptions,
  own((opts: Parsed<typeof statusOptions>) =>
    Effect.gen(function* () {
      const [{ remote, explain }, { printJson }, FetchHttpClient] = yield* loaded
      const s = yield* Effect.gen(function* () {
        const { url, client } = yield* remote(opts)
        return yield* Effect.mapError(client.mcp.status(), explain(url))
      }).pipe(Effect.provide(FetchHttpClient.layer))
      if (opts.json) return yield* printJson(s)
      const http = s.transports.find((t) => t.name === "streamable-http")
      yield* Console.log(`MCP server: ${s.tools} tools; streamable HTTP at ${http?.endpoint ?? "-"}, stdio with \`gateway --mcp\``)
      yield* Console.log(
        `protocol: ${s.latestProtocolVersion} (also ${s.protocolVersions.filter((v) => v !== s.latestProtocolVersion).join(", ")})`
      )
      yield* Console.log(
        `sessions active: ${s.sessionsActive}; started ${s.startedAt}${s.restartedAt ? `, restarted ${s.restartedAt}` : ""}`
      )
      yield* Console.log(
        `scopes enforced: ${s.enforceScopes ? "yes" : "no"}; descriptions compressed: ${s.compressDescriptions ? "yes" : "no"}`
      )
    })
  )
).pipe(Command.withDescription("The running server's MCP state: transports, protocol revisions, tools, active sessions."))

const restart = Command.make(
  "restart",
  statusOptions,
  own((opts: Parsed<typeof statusOptions>) =>
    Effect.gen(function* () {
      const [{ remote, explain }, { printJson }, FetchHttpClient] = yield* loaded
      const r = yield* Effect.gen(function* () {
        const { url, client } = yield* remote(opts)
        return yield* Effect.mapError(client.mcp.restart(), explain(url))
      }).pipe(Effect.provide(FetchHttpClient.layer))
      if (opts.json) return yield* printJson(r)
      yield* Console.log(`MCP restarted: ${r.closedSessions} HTTP session(s) closed, ${r.tools} tools listed`)
    })
  )
).pipe(Command.withDescription("Closes the running server's MCP HTTP sessions and builds the tool list again (clients reconnect)."))

export const mcpCommand = Command.make("mcp").pipe(
  Command.withDescription(
    "The running server's MCP server (`gateway --mcp` serves MCP over stdio instead), and the upstream MCP servers it serves (`servers`)."
  ),
  Command.withSubcommands([status, restart, serversCommand])
)
