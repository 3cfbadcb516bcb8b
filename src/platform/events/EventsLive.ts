import * as Layer from "effect/Layer"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { EventBus } from "./EventBus.js"

/**
 * The events area: the event bus (what services publish: breakers, budgets, settings...) and the
 * request lifecycle's hooks and listeners (src/kernel/hooks.ts). Reads nothing; the first area the
 * server adds to the core, since most of what serves publishes or listens.
 */
export const EventsLive: Layer.Layer<EventBus | RequestHooks> = Layer.mergeAll(EventBus.layer, RequestHooks.layer)
