import * as Effect from "effect/Effect"
import { serve as serveGateway } from "../../system/serve.js"
import type { Parsed } from "../handler.js"
import { overridesFrom, type rootOptions } from "../root.js"

/** `gateway` with no subcommand: the server (`--mcp`: the MCP server over stdio, docs/mcp.md). */
export const serve = (root: Parsed<typeof rootOptions>) =>
  Effect.gen(function* () {
    if (root.mcp) {
      const { serveStdio } = yield* Effect.promise(() => import("../../mcp/stdio.js"))
      return yield* serveStdio(overridesFrom(root))
    }
    return yield* serveGateway(overridesFrom(root))
  })
