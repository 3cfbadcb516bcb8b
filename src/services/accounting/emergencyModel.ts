import * as Effect from "effect/Effect"
import type { ConnectionsShape } from "../../upstream/providers/Connections.js"
import { dispatchModel } from "../routing/Router.js"
import type { AccountingConfigShape } from "./AccountingConfig.js"
import type { PricingShape } from "./Pricing.js"

/**
 * The free model a budget-exhausted request goes to, if there is one: the configured
 * `emergencyFallbackModel`, else an enabled local connection's model (a local provider costs
 * nothing), else a catalog chat model of an enabled connection priced at zero.
 */
export const emergencyModel = (deps: {
  readonly config: AccountingConfigShape
  readonly connections: ConnectionsShape
  readonly pricing: PricingShape
}): Effect.Effect<string | undefined> => {
  const { config, connections, pricing } = deps
  return Effect.gen(function* () {
    if (config.emergencyFallbackModel) return config.emergencyFallbackModel
    const enabled = (yield* connections.list).filter((c) => c.enabled)
    // A local provider costs nothing; otherwise a catalog model priced at zero.
    const local = enabled.find((c) => c.provider.category === "local" && dispatchModel(c))
    if (local) return `${local.name}/${dispatchModel(local)}`
    for (const c of enabled) {
      const free = c.provider.models.find((m) => {
        const p = m.kind === "chat" ? pricing.priceOf(c.provider.id, m.id) : undefined
        return p !== undefined && p.input === 0 && p.output === 0
      })
      if (free) return `${c.name}/${free.id}`
    }
    return undefined
  })
}
