import * as Layer from "effect/Layer"
import { ConfigBundle } from "../management/sync/ConfigBundle.js"
import { PlatformLive } from "../platform/PlatformLive.js"
import { StoreLive } from "../platform/store/StoreLive.js"
import { AdminAuth } from "../services/auth/AdminAuth.js"
import { ApiKeys } from "../services/auth/ApiKeys.js"
import { ContextStore } from "../services/context/ContextStore.js"
import { Aliases } from "../services/routing/Aliases.js"
import { AutoEngine } from "../services/routing/AutoEngine.js"
import { Combos } from "../services/routing/Combos.js"
import { Directory } from "../services/teams/Directory.js"
import { Usage } from "../services/usage/Usage.js"
import { UpstreamLive } from "../upstream/UpstreamLive.js"

/*
 * The gateway's core: what works without serving. The server (src/server/Gateway.ts) adds its
 * areas on it; the CLI's local commands (src/cli/local.ts) and the MCP stdio server use it alone,
 * so this module imports nothing of the server's graph and a local command loads only what it needs.
 */

/**
 * The core: the store (StoreLive), the flags, settings and backups (PlatformLive), the providers
 * and the way to them (UpstreamLive), and on them the records a local command reads and writes:
 * API keys and the admin login, people and teams (the directory), combos (over the auto engine) and aliases, the context store, the
 * usage rows' writer, the config bundle. Needs AppConfig.
 */
export const CoreLayer = Layer.mergeAll(
  ApiKeys.layer,
  AdminAuth.layer,
  Usage.layer,
  Combos.layer,
  Aliases.layer,
  ContextStore.layer,
  ConfigBundle.layer
).pipe(
  // Keys name their owners from the directory.
  Layer.provideMerge(Directory.layer),
  Layer.provideMerge(AutoEngine.layer),
  Layer.provideMerge(UpstreamLive),
  Layer.provideMerge(PlatformLive),
  Layer.provideMerge(StoreLive)
)
