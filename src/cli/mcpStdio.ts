import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import { cliLogger } from "./output.js"
import { AppConfig, type AppConfigShape } from "../platform/config/AppConfig.js"
import { BadRequest } from "../domain/errors.js"
import { EventBus } from "../platform/events/EventBus.js"
import { sequentialLayer } from "../platform/system/buildLayer.js"
import { CoreLayer } from "../server/CoreLayer.js"
import { ResilienceLive } from "../services/resilience/ResilienceLive.js"
import { SkillCatalog } from "../services/skills/SkillCatalog.js"
import { SkillRunner } from "../services/skills/SkillRunner.js"
import { UsageQueries } from "../services/usage/UsageQueries.js"
import { stdioCaller } from "../management/mcp/caller.js"
import { McpTools } from "../management/mcp/McpTools.js"
import { makeMcpServer } from "../management/mcp/server.js"

/**
 * `gateway --mcp`: the MCP tools over stdin/stdout, in this process, on the local database in
 * DATA_DIR (the services `gateway keys` uses, plus what the tools read). stdout carries protocol
 * messages only; logs go to stderr (warnings and above unless LOG_LEVEL says otherwise). Ends
 * when stdin closes.
 */
export const serveStdio = (overrides: Partial<AppConfigShape>) => {
  const config = AppConfig.layer(overrides)
  const layer = McpTools.layer.pipe(
    Layer.provide(SkillRunner.layer),
    Layer.provide(Layer.mergeAll(SkillCatalog.layer, UsageQueries.layer, ResilienceLive)),
    Layer.provide(EventBus.layer),
    Layer.provideMerge(CoreLayer),
    Layer.provide(config),
    Layer.provideMerge(config),
    Layer.provide(cliLogger)
  )
  const program = Effect.gen(function* () {
    const tools = yield* McpTools
    const { host, port } = yield* AppConfig
    const narrowed = yield* Config.string("GATEWAY_MCP_SCOPES").pipe(Config.option, Effect.orDie)
    // Skill raw URLs point at the HTTP server this configuration would run.
    const connectHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host
    const caller = stdioCaller(
      Option.getOrUndefined(narrowed),
      `http://${connectHost.includes(":") ? `[${connectHost}]` : connectHost}:${port}`
    )
    if (typeof caller === "string") return yield* new BadRequest({ message: caller })
    const runtime = yield* Effect.runtime<never>()
    const server = makeMcpServer(tools, Runtime.runPromise(runtime), () => caller)
    yield* Effect.acquireRelease(
      Effect.promise(() => server.connect(new StdioServerTransport())),
      () => Effect.promise(() => server.close().catch(() => undefined))
    )
    yield* Effect.logDebug(`MCP over stdio: ${tools.tools.length} tools, scopes ${[...caller.scopes].join(", ")}`)
    yield* Effect.async<void>((resume) => {
      const done = () => resume(Effect.void)
      process.stdin.once("end", done)
      process.stdin.once("close", done)
      server.onclose = done
    })
  })
  return Effect.provide(Effect.scoped(program), sequentialLayer(layer))
}
