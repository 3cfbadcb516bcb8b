import * as Layer from "effect/Layer"
import { AdminAuth } from "../services/auth/AdminAuth.js"
import { ApiKeys } from "../services/auth/ApiKeys.js"
import { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { ProviderChecks } from "../upstream/providers/ProviderChecks.js"
import { BatchWriter } from "../platform/store/BatchWriter.js"
import * as Db from "../platform/store/Db.js"
import { KeyValue } from "../platform/store/KeyValue.js"
import { Secrets } from "../platform/store/Secrets.js"
import { StoreVersion } from "../platform/store/StoreVersion.js"
import { Backups } from "../platform/store/Backups.js"
import { ConfigBundle } from "../management/sync/Bundle.js"
import { Settings } from "../platform/settings/Settings.js"
import { Egress } from "../upstream/egress/Egress.js"
import { ProxyRegistry } from "../upstream/egress/ProxyRegistry.js"
import { ContextStore } from "../services/context/ContextStore.js"
import { UpstreamHttp } from "../upstream/client/UpstreamHttp.js"
import { AutoEngine } from "../services/routing/AutoEngine.js"
import { Combos } from "../services/routing/Combos.js"
import { Aliases } from "../services/routing/Aliases.js"
import { ProviderNodes } from "../upstream/providers/ProviderNodes.js"
import { ProviderModels } from "../upstream/providers/ProviderModels.js"
import { Usage } from "../services/usage/Usage.js"
import { Connections } from "../upstream/providers/Connections.js"
import { EgressMark } from "../upstream/client/egressMark.js"

/*
 * The gateway's core: the database and every service that works without the HTTP server. The
 * server (src/server/Gateway.ts) builds on it; the CLI's local commands (src/cli/local.ts) and
 * the MCP stdio server use it alone, so this module imports nothing of the server's graph and
 * a local command loads only what it needs.
 */

/** The database and what sits directly on it. Needs AppConfig. */
export const StoreLayer = Layer.mergeAll(BatchWriter.layer, KeyValue.layer, StoreVersion.layer(), Secrets.layer).pipe(Layer.provideMerge(Db.layer))

/** Every service of the gateway except the HTTP server; the CLI uses this on the local database. */
export const CoreLayer = Layer.mergeAll(ProviderChecks.layer, ConfigBundle.layer, Aliases.layer, ProviderModels.layer, ProviderNodes.layer).pipe(
  // Upstream proxies (src/upstream/egress/): the registry, the global default of the settings, one dispatcher per proxy.
  Layer.provideMerge(Egress.layer),
  Layer.provideMerge(Layer.mergeAll(Settings.layer, ProxyRegistry.layer, ContextStore.layer)),
  Layer.provideMerge(Backups.layer),
  Layer.provideMerge(Layer.mergeAll(ApiKeys.layer, AdminAuth.layer, Usage.layer, Connections.layer, Combos.layer)),
  Layer.provideMerge(AutoEngine.layer),
  Layer.provideMerge(UpstreamHttp.layer),
  Layer.provideMerge(Layer.mergeAll(FeatureFlags.layer, EgressMark.layer)),
  Layer.provideMerge(StoreLayer)
)
