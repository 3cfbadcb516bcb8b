import type { SqlClient } from "@effect/sql/SqlClient"
import type { ConfigError } from "effect/ConfigError"
import * as Layer from "effect/Layer"
import type { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import type { Settings } from "../platform/settings/Settings.js"
import type { BatchWriter } from "../platform/store/BatchWriter.js"
import type { KeyValue } from "../platform/store/KeyValue.js"
import type { Secrets } from "../platform/store/Secrets.js"
import type { StoreVersion } from "../platform/store/StoreVersion.js"
import { EgressMark } from "./client/EgressMark.js"
import { UpstreamHttp } from "./client/UpstreamHttp.js"
import { Egress } from "./egress/Egress.js"
import { ProxyRegistry } from "./egress/ProxyRegistry.js"
import { Connections } from "./providers/Connections.js"
import { ProviderChecks } from "./providers/ProviderChecks.js"
import { ProviderModels } from "./providers/ProviderModels.js"
import { ProviderNodes } from "./providers/ProviderNodes.js"

/**
 * The upstream area: the providers' connections, nodes, models and checks, the HTTP client, the
 * proxies and the egress over them. Part of the core (src/server/CoreLayer.ts). Reads the store
 * (StoreLive) and the flags and settings (PlatformLive). The egress mark comes first: the client
 * and the egress read it when they are built.
 */
export const UpstreamLive: Layer.Layer<
  EgressMark | UpstreamHttp | Connections | ProxyRegistry | Egress | ProviderChecks | ProviderModels | ProviderNodes,
  ConfigError,
  SqlClient | BatchWriter | KeyValue | StoreVersion | Secrets | FeatureFlags | Settings
> = Layer.mergeAll(ProviderChecks.layer, ProviderModels.layer, ProviderNodes.layer).pipe(
  Layer.provideMerge(Egress.layer),
  Layer.provideMerge(Layer.mergeAll(UpstreamHttp.layer, Connections.layer, ProxyRegistry.layer)),
  Layer.provideMerge(EgressMark.layer)
)
