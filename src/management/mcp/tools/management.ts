import * as Effect from "effect/Effect"
import { ComboSwitchArgs, NoArgs, ProviderTestArgs, UsageSummaryArgs } from "../../../domain/mcp.js"
import type { ConnectionsShape } from "../../../upstream/providers/Connections.js"
import { liveConnectionView } from "../../../upstream/providers/liveView.js"
import type { ProviderChecksShape } from "../../../upstream/providers/ProviderChecks.js"
import type { CooldownsShape } from "../../../services/resilience/Cooldowns.js"
import { comboView, type CombosShape, switchPrimary } from "../../../services/routing/Combos.js"
import { monitoringHealth, type MonitoringHealthDeps } from "../../../services/usage/monitoringHealth.js"
import { actorOf } from "../caller.js"
import { type McpTool, tool } from "../tool.js"

export interface ManagementToolDeps extends MonitoringHealthDeps {
  readonly checks: ProviderChecksShape
  readonly combos: CombosShape
  readonly connections: ConnectionsShape
  readonly cooldowns: CooldownsShape
}

/** Providers, combos, usage and health: the same services, and answers, as the management API. */
export const managementTools = (deps: ManagementToolDeps): ReadonlyArray<McpTool> => [
  tool({
    name: "gateway_providers_list",
    title: "List provider connections",
    scope: "read:providers",
    description:
      "Lists the provider connections (upstream accounts) the gateway routes to, keys masked. " +
      "Each has its provider, base URL, default model, whether it is enabled, and its test and cooldown state.",
    args: NoArgs,
    readOnly: true,
    run: () => Effect.map(deps.connections.list, (list) => ({ connections: list.map((c) => liveConnectionView(deps.cooldowns, c)) }))
  }),
  tool({
    name: "gateway_providers_test",
    title: "Test a provider connection",
    scope: "write:providers",
    description:
      "Tests a provider connection by asking its upstream for the model list with the stored credentials, and records the outcome on the connection. " +
      "Answers ok, the HTTP status, latency, the number of models and the error if any.",
    args: ProviderTestArgs,
    readOnly: false,
    openWorld: true,
    run: (args) => Effect.map(deps.checks.test(args.provider.trim()), (result) => ({ ...result }))
  }),
  tool({
    name: "gateway_combos_list",
    title: "List routing combos",
    scope: "read:combos",
    description:
      "Lists the routing combos: model ids that route over several targets with a strategy (priority, weighted, auto and others), with their targets in order.",
    args: NoArgs,
    readOnly: true,
    run: () => Effect.map(deps.combos.list, (list) => ({ combos: list.map(comboView) }))
  }),
  tool({
    name: "gateway_combos_switch_primary",
    title: "Switch a combo's primary target",
    scope: "write:combos",
    description:
      "Makes a model the primary (first) target of a combo, moving it to the front or adding it there. " +
      "The other targets keep their order; requests through the combo try the new primary first from the next request on.",
    args: ComboSwitchArgs,
    readOnly: false,
    run: (args, { caller }) =>
      Effect.map(
        switchPrimary(deps.combos, args.combo.trim(), { model: args.model.trim(), weight: args.weight }, actorOf(caller)),
        (s) => ({
          combo: comboView(s.combo),
          primary: s.primary,
          added: s.added
        })
      )
  }),
  tool({
    name: "gateway_usage_summary",
    title: "Usage summary",
    scope: "read:usage",
    description:
      "Summarises the gateway's usage over a time range: requests, errors, tokens, cost in USD, cache hits and latency, in total and grouped. " +
      "groupBy is hour, day, model, provider, apiKey, connection, endpoint, team or user; from and to default to the last 24 hours.",
    args: UsageSummaryArgs,
    readOnly: true,
    run: (args) => Effect.map(deps.queries.history(args), (history) => ({ ...history }))
  }),
  tool({
    name: "gateway_health_summary",
    title: "Provider health summary",
    scope: "read:health",
    description:
      "Reports the gateway's health: ok, degraded or down, with each connection's state (available, cooling down, circuit open, disabled), its circuit breaker and its last day's requests and error rate.",
    args: NoArgs,
    readOnly: true,
    run: () => Effect.map(monitoringHealth(deps), (health) => ({ ...health }))
  })
]
