import type { SqlClient } from "@effect/sql/SqlClient"
import * as Layer from "effect/Layer"
import type { AppConfig } from "./config/AppConfig.js"
import { FeatureFlags } from "./flags/FeatureFlags.js"
import { Settings } from "./settings/Settings.js"
import { Backups } from "./store/Backups.js"
import type { BatchWriter } from "./store/BatchWriter.js"
import type { KeyValue } from "./store/KeyValue.js"
import type { Secrets } from "./store/Secrets.js"
import type { StoreKind } from "./store/StoreKind.js"
import type { StoreVersion } from "./store/StoreVersion.js"

/**
 * The platform area: the gateway's own state on the store, the feature flags, the settings and
 * the backups. Part of the core (src/server/CoreLayer.ts). Reads the store (StoreLive; Backups
 * asks which kind it is).
 */
export const PlatformLive: Layer.Layer<
  FeatureFlags | Settings | Backups,
  never,
  AppConfig | SqlClient | StoreKind | BatchWriter | KeyValue | StoreVersion | Secrets
> = Layer.mergeAll(FeatureFlags.layer, Settings.layer, Backups.layer)
