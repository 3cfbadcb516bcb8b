/**
 * How the pipeline asks the router for a request's plan: what the plan is made from (the
 * request's features, decoded only when routing asks; its mode, budget and session), the plan
 * refused in the client's terms, the first target of a model id, and the plan known in memory.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { WireFormat } from "../upstream/formats/format.js"
import type { RoutePlan } from "../services/routing/plan.js"
import { requestFeatures } from "../services/routing/auto/features.js"
import type { RouteError, RouterShape } from "../services/routing/Router.js"
import type { RequestFeatures } from "../services/routing/types.js"
import { allBlocked } from "../kernel/attempts.js"
import { clientError, type InferenceError } from "../kernel/errors.js"
import type { InferenceCall, InferenceShape } from "./call.js"
import { type HttpRequestContext, requestHeader } from "./io.js"

/** Features of a request that could not be decoded: the router still needs something. */
export const NO_FEATURES = (sessionId: string | undefined): RequestFeatures => ({
  tokenEstimate: 0,
  maxOutputTokens: undefined,
  hasTools: false,
  hasImages: false,
  wantsReasoning: false,
  taskType: "chat",
  specificity: 0,
  sessionId
})

/** What a plan is asked with: `sessionId` is the client's own session id (X-Session-Id or the body's), read once per request. */
interface PlanRequest {
  readonly features?: () => RequestFeatures
  readonly ctx?: HttpRequestContext
  readonly sessionId?: string | undefined
}

const routeError = (format: WireFormat) => (e: RouteError) =>
  clientError(format, {
    status: e.status,
    kind: e.status === 404 ? "not_found" : "invalid_request",
    message: e.message,
    code: e.code,
    param: "model"
  })

const planInputOf = (input: PlanRequest) => {
  const { ctx, sessionId } = input
  return {
    features: input.features ?? (() => NO_FEATURES(sessionId)),
    ...(ctx ? { mode: requestHeader(ctx, "x-gateway-mode"), budget: requestHeader(ctx, "x-gateway-budget") } : {}),
    ...(sessionId ? { sessionId, apiKeyId: ctx?.apiKeyId } : ctx?.conversation !== undefined ? { conversation: ctx.conversation } : {})
  }
}

/**
 * The pipeline's planning, made once with the layer: `planFor` a model id (the plan in memory
 * when the router has it), `resolve` its first target, and `peekPlan` for the common path.
 */
export const makePlanning = ({ router }: { readonly router: RouterShape }) => {
  const planFor = (model: string, format: WireFormat, input: PlanRequest = {}): Effect.Effect<RoutePlan, InferenceError> => {
    const planInput = planInputOf(input)
    const known = router.peekPlan(model, planInput)
    if (known !== undefined) return Either.mapLeft(known, routeError(format))
    return Effect.mapError(router.plan(model, planInput), routeError(format))
  }

  const resolve: InferenceShape["resolve"] = (model, format) =>
    Effect.flatMap(planFor(model, format), (plan) => {
      const first = plan.candidates[0] ?? plan.fusion?.judge ?? plan.blocked[0]?.candidate
      return first ? Effect.succeed({ connection: first.connection, model: first.model }) : Effect.fail(allBlocked(format, plan))
    })

  /** The plan the router knows for a call's model, without an effect (undefined: not in memory). */
  const peekPlan = (call: InferenceCall, sessionId: string | undefined) => {
    let features: RequestFeatures | undefined
    const input = planInputOf({
      ctx: call.ctx,
      sessionId,
      features: () => {
        if (features === undefined) {
          try {
            features = requestFeatures((call.decode ?? call.format.decodeRequest)(call.body), sessionId)
          } catch {
            features = NO_FEATURES(sessionId)
          }
        }
        return features
      }
    })
    return router.peekPlan(call.model, input)
  }

  return { planFor, resolve, peekPlan }
}
