/**
 * The request lifecycle's hooks fired (docs/ARCHITECTURE.md, "Seam 2: the request lifecycle"): each
 * event's handlers from the table (hookTable.ts) in order, synchronously while they answer
 * synchronously. Sees the request only as `HookHost`.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import { errorKindForStatus } from "../domain/canonical.js"
import type { WireFormat } from "../upstream/formats/format.js"
import type { FailureInfo } from "../services/resilience/types.js"
import type { RoutePlan } from "../services/routing/plan.js"
import type { Candidate } from "../services/routing/types.js"
import type { UsageRecord } from "../services/usage/Usage.js"
import { clientError, InferenceError } from "./errors.js"

export * from "./hookEvents.js"
export * from "./hookTable.js"
import type { HookEntry as Entry, HookHost } from "./hookTable.js"
import {
  type AnswerRewrite,
  type BlockAnswer,
  type ComboResolveEvent,
  type ErrorEvent,
  GuardFailure,
  type HookEvent,
  type HookEvents,
  type HookHandler,
  type HookRequest,
  type HookReturn,
  type HookTarget,
  type ProviderErrorEvent,
  type QuotaExhaustEvent,
  type ResponseEvent
} from "./hookEvents.js"

// ---------------------------------------------------------------- firing

const requestOf = (host: HookHost): HookRequest =>
  (host.hookRequest ??= {
    requestId: host.requestId,
    timestamp: host.startedAt,
    method: host.method,
    path: host.path,
    headers: host.headers,
    apiKeyId: host.apiKeyId,
    metadata: {}
  })

/**
 * A header's name in lower case: the name itself when it already is (ASCII without a capital, as
 * the hooks' headers nearly always are), else `toLowerCase`'s. toLowerCase made a new string even
 * for a name it left as it was, and a hook that sets a header (context compression's) does so on
 * every request.
 */
const lowerName = (name: string): string => {
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i)
    if (c > 0x7f || (c >= 0x41 && c <= 0x5a)) return name.toLowerCase()
  }
  return name
}

/** Built-in handlers take no request view: this stands for it. */
const NO_REQUEST = Object.freeze({}) as HookRequest

const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** A handler that threw: logged (through the gateway's runtime), and the request goes on. */
const report = (host: HookHost, entry: Entry<never>, event: HookEvent, e: unknown): void => {
  const log = Effect.logWarning(`hook ${entry.name} failed in ${event} (skipped): ${describe(e)}`).pipe(
    Effect.annotateLogs({ requestId: host.requestId })
  )
  const runtime = host.hooks?.runtime
  if (runtime) Runtime.runFork(runtime)(log)
  else Effect.runFork(log)
}

/** The code of the refusal a failed guard answers (docs/errors.md). */
export const GUARD_FAILED = "guardrail_unavailable"

/**
 * A fail-closed hook failed: logged as an error, and the request refused with a 503 naming the
 * guard (and the part of it that failed, from a `GuardFailure`), never sent on without it.
 */
const guardFailed = (host: HookHost, entry: Entry<never>, event: HookEvent, e: unknown): HookReturn => {
  const part = e instanceof GuardFailure ? e.part : entry.name
  const reason = describe(e instanceof GuardFailure ? e.reason : e)
  const log = Effect.logError(`guard ${entry.name} failed in ${event}: ${part}: ${reason}; the request was refused (${GUARD_FAILED})`).pipe(
    Effect.annotateLogs({ requestId: host.requestId })
  )
  const runtime = host.hooks?.runtime
  if (runtime) Runtime.runFork(runtime)(log)
  else Effect.runFork(log)
  return {
    block: {
      status: 503,
      code: GUARD_FAILED,
      message: `the request was not sent: the ${part} guard could not check it (it failed; the gateway fails closed). Try again; if it persists, the operator finds the cause in the gateway's log under request ${host.requestId}`,
      headers: { "retry-after": "1" }
    }
  }
}

/** A handler's Effect, its failures logged and skipped (a guard's refuse the request); an interruption (the client left) goes on as it is.
 * */
const guarded = (
  host: HookHost,
  entry: Entry<never>,
  event: HookEvent,
  effect: Effect.Effect<HookReturn, unknown>
): Effect.Effect<HookReturn> =>
  entry.failClosed
    ? Effect.catchAllCause(effect, (cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : Effect.succeed(guardFailed(host, entry, event, Cause.squash(cause)))
      )
    : entry.builtin
      ? (effect as Effect.Effect<HookReturn>)
      : Effect.catchAllCause(effect, (cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause as Cause.Cause<never>)
            : Effect.as(Effect.logWarning(`hook ${entry.name} failed in ${event} (skipped)`, cause), undefined)
        )

/** What the handlers of one event decided. */
interface Decision {
  body?: Record<string, unknown>
  block?: { readonly hook: string; readonly answer: BlockAnswer }
}

const BODY = 1
const BLOCK = 2
const REWRITE = 4

/** `second` after `first`. */
const chain = (first: AnswerRewrite | undefined, second: AnswerRewrite): AnswerRewrite => {
  if (first === undefined) return second
  return {
    whole: (a) => {
      const x = first.whole ? first.whole(a) : a
      return second.whole ? second.whole(x) : x
    },
    head: (h) => {
      const x = first.head ? first.head(h) : h
      return second.head ? second.head(x) : x
    },
    frame: (t) => {
      const x = first.frame ? first.frame(t) : t
      return second.frame ? second.frame(x) : x
    },
    end: (t, e) => {
      const x = first.end ? first.end(t, e) : { text: t, error: e }
      return second.end ? second.end(x.text, x.error) : x
    }
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * Applies one handler's verdict where the event allows it; answers the decision so far (with
 * `block` set, later handlers do not run). A malformed verdict is reported and ignored.
 */
const apply = (
  host: HookHost,
  entry: Entry<never>,
  name: HookEvent,
  event: { body?: unknown },
  allows: number,
  out: HookReturn,
  decision: Decision | undefined
): Decision | undefined => {
  if (out === undefined || out === null) return decision
  if (typeof out !== "object") {
    report(host, entry, name, new TypeError(`a handler answers a verdict object or nothing, not ${typeof out}`))
    return decision
  }
  if (out.metadata !== undefined) {
    if (isObject(out.metadata)) Object.assign(requestOf(host).metadata, out.metadata)
    else report(host, entry, name, new TypeError("metadata must be an object"))
  }
  if (out.body !== undefined && (allows & BODY) !== 0) {
    if (isObject(out.body)) {
      event.body = out.body
      decision = { ...decision, body: out.body }
    } else report(host, entry, name, new TypeError("body must be a JSON object"))
  }
  if (out.rewrite !== undefined && (allows & REWRITE) !== 0) {
    if (isObject(out.rewrite)) host.rewrite = chain(host.rewrite, out.rewrite as AnswerRewrite)
    else report(host, entry, name, new TypeError("rewrite must be an object of functions"))
  }
  if (out.headers !== undefined && (allows & BODY) !== 0 && host.responseHeaders !== undefined) {
    if (isObject(out.headers)) for (const k in out.headers) host.responseHeaders[lowerName(k)] = String(out.headers[k])
    else report(host, entry, name, new TypeError("headers must be an object"))
  }
  if (out.block !== undefined && (allows & BLOCK) !== 0)
    decision = { ...decision, block: { hook: entry.name, answer: isObject(out.block) ? out.block : {} } }
  return decision
}

/** The write-path events carry no body (`apply` never writes to it there). */
const NO_BODY: { body?: unknown } = Object.freeze({})

export type Fired = Decision | undefined | Effect.Effect<Decision | undefined>

/** Runs `list` from `i` in order: synchronously while handlers answer synchronously, as an Effect from the first one that does not. */
const runFrom = (
  list: ReadonlyArray<Entry<never>>,
  i: number,
  name: HookEvent,
  event: object,
  host: HookHost,
  allows: number,
  decision: Decision | undefined
): Fired => {
  for (; i < list.length; i++) {
    const entry = list[i]!
    let out: HookReturn | Effect.Effect<HookReturn, unknown>
    try {
      out = (entry.handler as HookHandler<object>)(event, entry.builtin ? NO_REQUEST : requestOf(host))
    } catch (e) {
      if (entry.failClosed) out = guardFailed(host, entry, name, e)
      else if (entry.builtin) throw e
      else {
        report(host, entry, name, e)
        continue
      }
    }
    if (Effect.isEffect(out)) {
      const next = i + 1
      // The last handler (the usual case: a built-in on the request's end) needs no continuation.
      if (next === list.length)
        return Effect.map(guarded(host, entry, name, out), (verdict) => apply(host, entry, name, event, allows, verdict, decision))
      return Effect.flatMap(guarded(host, entry, name, out), (verdict) => {
        const d = apply(host, entry, name, event, allows, verdict, decision)
        if (d?.block) return Effect.succeed(d)
        const rest = runFrom(list, next, name, event, host, allows, d)
        return Effect.isEffect(rest) ? rest : Effect.succeed(rest)
      })
    }
    decision = apply(host, entry, name, event, allows, out, decision)
    if (decision?.block) return decision
  }
  return decision
}

const asEffect = (fired: Fired): Effect.Effect<Decision | undefined> => (Effect.isEffect(fired) ? fired : Effect.succeed(fired))

/**
 * Fires an event from the write path (stream start, frame, stream end): synchronously, in order;
 * an Effect a handler answers is run detached (not awaited), on the gateway's runtime.
 */
export const observe = <K extends "onStreamStart" | "onFrame" | "onStreamEnd">(
  host: HookHost,
  name: K,
  list: ReadonlyArray<Entry<HookEvents[K]>>,
  event: HookEvents[K]
): void => {
  for (const entry of list as ReadonlyArray<Entry<never>>) {
    try {
      const out = (entry.handler as HookHandler<object>)(event, entry.builtin ? NO_REQUEST : requestOf(host))
      if (Effect.isEffect(out)) {
        const run = Effect.flatMap(guarded(host, entry, name, out), (verdict) =>
          Effect.sync(() => apply(host, entry, name, NO_BODY, 0, verdict, undefined))
        )
        const runtime = host.hooks?.runtime
        if (runtime) Runtime.runFork(runtime)(run)
        else Effect.runFork(run)
      } else if (out !== undefined) apply(host, entry, name, NO_BODY, 0, out, undefined)
    } catch (e) {
      if (entry.builtin) throw e
      report(host, entry, name, e)
    }
  }
}

/** A hook's block as the client's answer: its own body as it is, or an error in the client's format. */
export const blockedAnswer = (format: WireFormat, hook: string, answer: BlockAnswer): InferenceError => {
  const status =
    typeof answer.status === "number" && Number.isInteger(answer.status) && answer.status >= 200 && answer.status <= 599
      ? answer.status
      : 403
  const message = typeof answer.message === "string" && answer.message !== "" ? answer.message : `the request was blocked by ${hook}`
  const headers = isObject(answer.headers) ? (answer.headers as Readonly<Record<string, string>>) : undefined
  const code = typeof answer.code === "string" && answer.code !== "" ? answer.code : "request_blocked"
  return answer.body !== undefined
    ? new InferenceError({ status, kind: errorKindForStatus(status), code, message, body: answer.body, ...(headers ? { headers } : {}) })
    : clientError(format, { status, kind: errorKindForStatus(status), code, message }, headers)
}

/** The body the handlers left (undefined: unchanged), or the block as a failure in the client's terms. */
const settle = (host: HookHost, format: WireFormat, fired: Fired): Effect.Effect<Record<string, unknown> | undefined, InferenceError> =>
  Effect.flatMap(asEffect(fired), (d) => {
    if (d?.block) {
      host.blockedBy = d.block.hook
      return Effect.fail(blockedAnswer(format, d.block.hook, d.block.answer))
    }
    return Effect.succeed(d?.body)
  })

/**
 * A candidate as the hooks see it: made once per connection object and model (connections are
 * immutable; a changed one is a new object) and shared, frozen, by the requests that go there,
 * since onModelSelect names every request's candidates. Models per connection are bounded (a
 * pass-through provider's come from clients): past the bound a target is made each time.
 */
const targets = new WeakMap<Candidate["connection"], Map<string, HookTarget>>()
const TARGETS_PER_CONNECTION = 256
export const targetOf = (c: Candidate): HookTarget => {
  let byModel = targets.get(c.connection)
  if (byModel === undefined) {
    byModel = new Map()
    targets.set(c.connection, byModel)
  }
  const known = byModel.get(c.model)
  if (known !== undefined && known.key === c.key) return known
  const made: HookTarget = Object.freeze({ key: c.key, provider: c.connection.provider.id, connection: c.connection.name, model: c.model })
  if (known !== undefined || byModel.size < TARGETS_PER_CONNECTION) byModel.set(c.model, made)
  return made
}

/**
 * A plan's candidates as the hooks see them, shared, frozen, by the requests of the last plan
 * seen: the router keeps the usual request's plan (src/services/routing/Router.ts), so
 * onModelSelect on the common path names them without an array per request.
 */
let lastPlan: RoutePlan | undefined
let lastTargets: ReadonlyArray<HookTarget> = []
const targetsOf = (plan: RoutePlan): ReadonlyArray<HookTarget> => {
  if (plan !== lastPlan) {
    lastTargets = Object.freeze(plan.candidates.map(targetOf))
    lastPlan = plan
  }
  return lastTargets
}

/** onRequest. Call only when there are handlers. */
export const requestReceived = (
  host: HookHost,
  format: WireFormat,
  call: { readonly endpoint: string; readonly model: string; readonly stream: boolean; readonly body: Record<string, unknown> }
): Effect.Effect<Record<string, unknown> | undefined, InferenceError> => {
  const event = { endpoint: call.endpoint, format: format.id, model: call.model, stream: call.stream, body: call.body }
  return settle(
    host,
    format,
    runFrom(host.hooks!.onRequest as ReadonlyArray<Entry<never>>, 0, "onRequest", event, host, BODY | BLOCK | REWRITE, undefined)
  )
}

/** onComboResolve (for combo, auto and quota-share plans), then onModelSelect. Call only when either has handlers. */
export const routeResolved = (
  host: HookHost,
  format: WireFormat,
  model: string,
  plan: RoutePlan,
  body: Record<string, unknown>,
  endpoint: string
): Effect.Effect<Record<string, unknown> | undefined, InferenceError> => {
  const table = host.hooks!
  const candidates = plan.candidates.map(targetOf)
  const select = (): Effect.Effect<Record<string, unknown> | undefined, InferenceError> => {
    if (table.onModelSelect.length === 0) return Effect.succeed(undefined)
    const first = plan.candidates[0] ?? plan.fusion?.judge
    const event = {
      model,
      format: format.id,
      endpoint,
      route: plan.kind,
      strategy: plan.strategy,
      target: first ? targetOf(first) : undefined,
      candidates,
      body
    }
    return settle(
      host,
      format,
      runFrom(table.onModelSelect as ReadonlyArray<Entry<never>>, 0, "onModelSelect", event, host, BODY | BLOCK, undefined)
    )
  }
  if (plan.kind === "direct" || table.onComboResolve.length === 0) return select()
  const event: ComboResolveEvent = {
    model,
    route: plan.kind,
    scope: plan.scope,
    strategy: plan.strategy,
    candidates,
    blocked: plan.blocked.map((b) => ({ target: targetOf(b.candidate), reason: b.reason })),
    fusion: plan.fusion !== undefined
  }
  return Effect.flatMap(
    settle(host, format, runFrom(table.onComboResolve as ReadonlyArray<Entry<never>>, 0, "onComboResolve", event, host, BLOCK, undefined)),
    select
  )
}

/**
 * onModelSelect for a direct plan without an effect (the common path): what its handlers
 * decided when every one answered at once, or the Effect that finishes running them (a handler
 * answered one). Handlers' metadata and headers are applied as they run, as `routeResolved` applies
 * them; `settleModelSelect` turns what this answers into what `routeResolved` would have answered.
 * Call only when there are handlers.
 */
export const modelSelectNow = (
  host: HookHost,
  format: WireFormat,
  model: string,
  plan: RoutePlan,
  body: Record<string, unknown>,
  endpoint: string
): Fired => {
  const first = plan.candidates[0] ?? plan.fusion?.judge
  const event = {
    model,
    format: format.id,
    endpoint,
    route: plan.kind,
    strategy: plan.strategy,
    target: first ? targetOf(first) : undefined,
    candidates: targetsOf(plan),
    body
  }
  return runFrom(host.hooks!.onModelSelect as ReadonlyArray<Entry<never>>, 0, "onModelSelect", event, host, BODY | BLOCK, undefined)
}

/** What `modelSelectNow` answered, as `routeResolved`'s answer: the body to send instead, or the block. */
export const settleModelSelect = (
  host: HookHost,
  format: WireFormat,
  fired: Fired
): Effect.Effect<Record<string, unknown> | undefined, InferenceError> => settle(host, format, fired)

/** Whether what `modelSelectNow` answered changes nothing: decided at once, no block, no other body. */
export const modelSelectLeftAlone = (fired: Fired): boolean =>
  !Effect.isEffect(fired) && fired?.block === undefined && fired?.body === undefined

/** onAttemptStart: the block (the attempt must not go out), or undefined. Call only when there are handlers. */
export const attemptStarted = (
  host: HookHost,
  format: WireFormat,
  attempt: number,
  candidate: Candidate,
  probe: boolean
): Effect.Effect<InferenceError | undefined> =>
  Effect.map(
    asEffect(
      runFrom(
        host.hooks!.onAttemptStart as ReadonlyArray<Entry<never>>,
        0,
        "onAttemptStart",
        { attempt, target: targetOf(candidate), probe },
        host,
        BLOCK,
        undefined
      )
    ),
    (d) => {
      if (!d?.block) return undefined
      host.blockedBy = d.block.hook
      return blockedAnswer(format, d.block.hook, d.block.answer)
    }
  )

/**
 * onProviderError, then (for a 429) onRateLimit; undefined when every handler answered
 * synchronously. Call only when either has handlers.
 */
export const upstreamFailed = (
  host: HookHost,
  attempt: number,
  candidate: Candidate,
  failure: FailureInfo,
  classification: { readonly reason: string; readonly retryable: boolean },
  answered: boolean
): Effect.Effect<void> | undefined => {
  const table = host.hooks!
  const event: ProviderErrorEvent = {
    attempt,
    target: targetOf(candidate),
    status: failure.status,
    kind: failure.kind,
    reason: classification.reason,
    retryable: classification.retryable && !answered,
    message: failure.message,
    answered
  }
  const limited = failure.status === 429 && table.onRateLimit.length !== 0
  const first = runFrom(table.onProviderError as ReadonlyArray<Entry<never>>, 0, "onProviderError", event, host, 0, undefined)
  if (!limited) return Effect.isEffect(first) ? Effect.asVoid(first) : undefined
  const then = () => runFrom(table.onRateLimit as ReadonlyArray<Entry<never>>, 0, "onRateLimit", event, host, 0, undefined)
  if (Effect.isEffect(first)) return Effect.flatMap(first, () => Effect.asVoid(asEffect(then())))
  const second = then()
  return Effect.isEffect(second) ? Effect.asVoid(second) : undefined
}

/** onQuotaExhaust (observes only); undefined when every handler answered synchronously. Call only when there are handlers. */
export const quotaExhausted = (host: HookHost, event: QuotaExhaustEvent): Effect.Effect<void> | undefined => {
  const fired = runFrom(host.hooks!.onQuotaExhaust as ReadonlyArray<Entry<never>>, 0, "onQuotaExhaust", event, host, 0, undefined)
  return Effect.isEffect(fired) ? Effect.asVoid(fired) : undefined
}

/**
 * The request's end: onResponse, or onError when it failed (`error`) or the client left (`gone`).
 * Fires once per request (later calls do nothing); undefined when nothing is left to run.
 */
export const endRequest = (host: HookHost, error?: InferenceError, gone = false): Effect.Effect<unknown> | undefined => {
  if (host.ended) return undefined
  host.ended = true
  const table = host.hooks
  if (table === undefined) return undefined
  const failed = error !== undefined || gone
  const list = failed ? table.onError : table.onResponse
  if (list.length === 0) return undefined
  const body = host.answerBody
  const ending = {
    status: gone ? 499 : host.answer.statusCode,
    headers: host.answerHeaders,
    body,
    streamed: body === undefined && host.answer.headersSent,
    usage: undefined as UsageRecord | undefined
  }
  const event = failed
    ? { ...ending, error: error && { status: error.status, code: error.code, message: error.message }, blockedBy: host.blockedBy }
    : ending
  const fired = runFrom(list as ReadonlyArray<Entry<never>>, 0, failed ? "onError" : "onResponse", event, host, 0, undefined)
  return Effect.isEffect(fired) ? fired : undefined
}

/** A built-in hook on the request's end that writes into the event for the handlers after it (the usage row). */
export const setUsage = (event: ResponseEvent | ErrorEvent, usage: UsageRecord): void => {
  ;(event as { usage: UsageRecord | undefined }).usage = usage
}
