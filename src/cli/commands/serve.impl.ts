import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { serve as serveGateway } from "../../system/serve.js"
import type { Parsed } from "../handler.js"
import { exitWith } from "../output.js"
import { overridesFrom, type rootOptions } from "../root.js"

/** `gateway` with no subcommand: the server (`--mcp`: the MCP server over stdio, not built yet). */
export const serve = (root: Parsed<typeof rootOptions>) =>
  Effect.gen(function* () {
    if (root.mcp) {
      yield* Console.error("error: the MCP stdio server is not built in this version yet")
      return yield* exitWith(2)
    }
    return yield* serveGateway(overridesFrom(root))
  })
