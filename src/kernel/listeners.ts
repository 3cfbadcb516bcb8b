/**
 * Firing the lifecycle's listeners (`LifecycleListener` in hookEvents.ts; registered with
 * `RequestHooks.listen` in hooks.ts): each point is a loop over the listeners the request began
 * with, so a point nobody takes costs the check.
 */
import type { RoutePlan } from "../services/routing/plan.js"
import type { AttemptEnd, AttemptStart, RequestFailure, Settlement } from "./hookEvents.js"
import type { HookTable } from "./hooks.js"
import type { RequestContext } from "./request.js"

/**
 * Tells the request's listeners it arrived (before authentication). Each `fire*` below is a
 * loop over the listeners the request began with: none, nothing but the check.
 */
export const fireBegin = (ctx: RequestContext): void => {
  const ls = ctx.hooks?.listeners
  if (ls !== undefined) for (let i = 0; i < ls.length; i++) ls[i]!.begin?.(ctx)
}

/** Its route plan is known. */
export const fireRouted = (ctx: RequestContext, plan: RoutePlan): void => {
  const ls = ctx.hooks?.listeners
  if (ls !== undefined) for (let i = 0; i < ls.length; i++) ls[i]!.routed?.(ctx, plan)
}

/** Whether a listener wants to hear of attempts as they start (tracing does): the caller then gathers what spans need. */
export const listensToAttemptStart = (ctx: RequestContext): boolean => {
  const ls = ctx.hooks?.listeners
  if (ls !== undefined) for (let i = 0; i < ls.length; i++) if (ls[i]!.attemptStart !== undefined) return true
  return false
}

/** An attempt starts; what each listener answered, by position, for `fireAttemptEnd` (undefined: none listens to starts). */
export const fireAttemptStart = (ctx: RequestContext, attempt: AttemptStart): Array<unknown> | undefined => {
  const ls = ctx.hooks?.listeners
  if (ls === undefined) return undefined
  let tokens: Array<unknown> | undefined
  for (let i = 0; i < ls.length; i++) {
    const start = ls[i]!.attemptStart
    if (start !== undefined) (tokens ??= new Array(ls.length))[i] = start(ctx, attempt)
  }
  return tokens
}

/** The attempt ended. */
export const fireAttemptEnd = (ctx: RequestContext, tokens: ReadonlyArray<unknown> | undefined, end: AttemptEnd): void => {
  const ls = ctx.hooks?.listeners
  if (ls !== undefined) for (let i = 0; i < ls.length; i++) ls[i]!.attemptEnd?.(ctx, tokens?.[i], end)
}

/** The request ended (after its end hooks' synchronous part, which put its usage row on ctx). */
export const fireEnd = (ctx: RequestContext, status: number, error?: RequestFailure): void => {
  const ls = ctx.hooks?.listeners
  if (ls !== undefined) for (let i = 0; i < ls.length; i++) ls[i]!.end?.(ctx, status, error)
}

/** A request was settled (`LifecycleListener.settled`); `table` is the registry's current one (a batch line has no request). */
export const fireSettled = (table: HookTable, s: Settlement): void => {
  const ls = table.listeners
  for (let i = 0; i < ls.length; i++) ls[i]!.settled?.(s)
}
