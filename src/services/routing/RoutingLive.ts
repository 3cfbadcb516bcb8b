import type * as Layer from "effect/Layer"
import type { EventBus } from "../../platform/events/EventBus.js"
import type { Connections } from "../../upstream/providers/Connections.js"
import type { Resilience } from "../resilience/Resilience.js"
import type { Aliases } from "./Aliases.js"
import type { AutoEngine } from "./AutoEngine.js"
import type { Combos } from "./Combos.js"
import { Router } from "./Router.js"
import type { RoutingMemory } from "./RoutingMemory.js"

/**
 * The routing area: the router, which turns a requested model into the targets to try. Reads the
 * connections, combos, aliases and auto engine (the core: the CLI edits them), the event bus
 * (EventsLive), Resilience and the routing memory (ResilienceLive).
 */
export const RoutingLive: Layer.Layer<Router, never, Connections | Combos | Aliases | AutoEngine | EventBus | Resilience | RoutingMemory> =
  Router.layer
