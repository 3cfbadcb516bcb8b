import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Usage } from "../../domain/canonical.js"
import type { RequestHooksShape } from "../../kernel/RequestHooks.js"
import { fireSettled } from "../../kernel/listeners.js"
import type { UsageShape } from "../usage/Usage.js"
import type { AccountingShape } from "./Accounting.js"
import type { BudgetsShape } from "./Budgets.js"
import type { InboundLimitsShape } from "./InboundLimits.js"
import type { TokenLimitsShape } from "./TokenLimits.js"

/**
 * A request's end, made once per layer: `settle` adds its spend to the key's budget and its tokens
 * to the token limits and inbound limits, learns the key's average from a success, then tells the
 * lifecycle's `settled` listeners (synchronous: every request settles); `finish`, for routes
 * outside the pipeline, prices the request, writes its usage row and settles it.
 */
export const makeSettlement = (deps: {
  readonly budgets: BudgetsShape
  readonly limits: TokenLimitsShape
  readonly inbound: InboundLimitsShape
  readonly hooks: RequestHooksShape
  readonly usage: UsageShape
  readonly clock: Clock.Clock
  /** Takes a settled success into the key's running average (reservations.ts). */
  readonly learn: (apiKeyId: string, costUsd: number, tokens: number) => void
  readonly cost: AccountingShape["cost"]
  readonly mediaCost: AccountingShape["mediaCost"]
}): Pick<AccountingShape, "settle" | "finish"> => {
  const { budgets, limits, inbound, hooks, usage, clock, learn, cost, mediaCost } = deps

  const settle: AccountingShape["settle"] = (s) => {
    const ok = s.status >= 200 && s.status < 300
    const now = clock.unsafeCurrentTimeMillis()
    if (s.apiKeyId !== null && s.costUsd > 0) budgets.unsafeRecord(s.apiKeyId, s.costUsd, now)
    const tokens = (s.usage?.inputTokens ?? 0) + (s.usage?.outputTokens ?? 0)
    if (s.apiKeyId !== null && ok) learn(s.apiKeyId, s.costUsd, tokens)
    inbound.settle(s.requestId, s.apiKeyId, tokens)
    if (s.apiKeyId !== null && tokens > 0 && s.provider && s.model) {
      // The target written out either way: a spread would make a throwaway object every request.
      limits.unsafeRecord(
        s.apiKeyId,
        s.connection
          ? { provider: s.provider, model: s.model, requestedModel: s.requestedModel, connection: s.connection }
          : { provider: s.provider, model: s.model, requestedModel: s.requestedModel },
        tokens,
        now
      )
    }
    // The lifecycle's listeners hear of it (the webhooks' request events among them).
    fireSettled(hooks.current(), s)
  }

  const finish: AccountingShape["finish"] = (r) =>
    Effect.gen(function* () {
      const u = {
        inputTokens: r.usage.input ?? undefined,
        outputTokens: r.usage.output ?? undefined,
        cachedInputTokens: r.usage.cached ?? undefined
      } as Partial<Usage>
      const { units, ...row } = r
      const costUsd =
        r.provider && r.model && r.status >= 200 && r.status < 300
          ? units
            ? mediaCost(r.provider, r.model, u, units)
            : cost(r.provider, r.model, u)
          : 0
      yield* usage.record({ ...row, costUsd })
      settle({
        requestId: r.requestId,
        apiKeyId: r.apiKeyId,
        provider: r.provider,
        model: r.model,
        requestedModel: r.requestedModel ?? r.model ?? "",
        status: r.status,
        usage: u,
        costUsd,
        error: r.error
      })
      return costUsd
    })

  return { settle, finish }
}
