import type { SqlClient } from "@effect/sql/SqlClient"
import type { ConfigError } from "effect/ConfigError"
import * as Layer from "effect/Layer"
import type { RequestHooks } from "../../kernel/RequestHooks.js"
import type { AppConfig } from "../../platform/config/AppConfig.js"
import type { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import type { Settings } from "../../platform/settings/Settings.js"
import type { KeyValue } from "../../platform/store/KeyValue.js"
import type { EgressMark } from "../../upstream/client/EgressMark.js"
import type { Connections } from "../../upstream/providers/Connections.js"
import type { Accounting } from "../accounting/Accounting.js"
import type { Pricing } from "../accounting/Pricing.js"
import { Compat } from "../compat/Compat.js"
import { Replay } from "../shadow/Replay.js"
import { Shadow } from "../shadow/Shadow.js"
import { Capture } from "./Capture.js"
import { Inspector } from "./Inspector.js"
import { InspectorConfig } from "./InspectorConfig.js"
import { Tproxy } from "./Tproxy.js"
import { TproxySystem } from "./TproxySystem.js"

/**
 * The inspector area: the traffic inspector with its capture modes, and what compares traffic (shadow, replay, compat). Needs the
 * egress mark (capture marks its own connections), the request hooks, Pricing (the buffer's costs) and Accounting (compat's runs).
 */
export const InspectorLive: Layer.Layer<
  TproxySystem | InspectorConfig | Inspector | Capture | Tproxy | Shadow | Compat | Replay,
  ConfigError,
  AppConfig | SqlClient | KeyValue | FeatureFlags | Settings | Connections | EgressMark | RequestHooks | Pricing | Accounting
> = Replay.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(Capture.layer, Tproxy.layer, Shadow.layer, Compat.layer)),
  Layer.provideMerge(Inspector.layer),
  Layer.provideMerge(InspectorConfig.layer),
  Layer.provideMerge(TproxySystem.layer)
)
