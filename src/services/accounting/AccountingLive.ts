import type { SqlClient } from "@effect/sql/SqlClient"
import type { ConfigError } from "effect/ConfigError"
import * as Layer from "effect/Layer"
import type { RequestHooks } from "../../kernel/RequestHooks.js"
import type { EventBus } from "../../platform/events/EventBus.js"
import type { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import type { BatchWriter } from "../../platform/store/BatchWriter.js"
import type { StoreHealth } from "../../platform/store/StoreHealth.js"
import type { StoreVersion } from "../../platform/store/StoreVersion.js"
import type { Connections } from "../../upstream/providers/Connections.js"
import type { ApiKeys } from "../auth/ApiKeys.js"
import { InFlight } from "../usage/InFlight.js"
import type { Usage } from "../usage/Usage.js"
import { UsageQueries, UsageRetention } from "../usage/UsageQueries.js"
import { Accounting } from "./Accounting.js"
import { AccountingConfig } from "./AccountingConfig.js"
import { Budgets } from "./Budgets.js"
import { Idempotency } from "./Idempotency.js"
import { InboundLimits } from "./InboundLimits.js"
import { Levels } from "./Levels.js"
import { Pricing } from "./Pricing.js"
import { ResponseCache } from "./ResponseCache.js"
import { TokenLimits } from "./TokenLimits.js"

/**
 * The accounting area: its settings, the levels above keys (Levels), prices, budgets, token and inbound limits, the response cache,
 * idempotency, the usage rows' queries and retention and the requests in flight, then Accounting
 * (what a request may spend and what it cost) over them. Reads the store, the flags, the API keys,
 * the connections (prices per connection) and the usage writer (the core), the event bus and the
 * request hooks (EventsLive).
 */
export const AccountingLive: Layer.Layer<
  | AccountingConfig
  | Pricing
  | Levels
  | Budgets
  | TokenLimits
  | InboundLimits
  | ResponseCache
  | Idempotency
  | UsageQueries
  | InFlight
  | Accounting,
  ConfigError,
  SqlClient | BatchWriter | StoreHealth | StoreVersion | FeatureFlags | ApiKeys | Connections | Usage | EventBus | RequestHooks
> = Accounting.layer.pipe(
  Layer.provideMerge(
    Layer.mergeAll(
      Pricing.layer,
      Budgets.layer,
      TokenLimits.layer,
      InboundLimits.layer,
      ResponseCache.layer,
      Idempotency.layer,
      UsageQueries.layer,
      UsageRetention,
      InFlight.layer
    )
  ),
  // Who owns each key and the levels' own limits, which budgets, token and inbound limits read.
  Layer.provideMerge(Levels.layer),
  Layer.provideMerge(AccountingConfig.layer)
)
