/**
 * The request lifecycle's hook table (docs/ARCHITECTURE.md, "Seam 2: the request lifecycle"): one
 * array per event, in run order, so an event nobody listens to costs one branch; a new table on
 * every change. hooks.ts fires it.
 */
import type * as Runtime from "effect/Runtime"
import {
  type AnswerRewrite,
  DEFAULT_PRIORITY,
  HOOK_EVENTS,
  type HookEvent,
  type HookEvents,
  type HookHandler,
  type HookRequest,
  type LifecycleListener,
  type RequestHeaders,
  type RequestHook
} from "./hookEvents.js"

export interface HookEntry<E> {
  readonly name: string
  readonly priority: number
  /** Registration order, across the registry and the hooks attached to single requests. */
  readonly seq: number
  readonly handler: HookHandler<E>
  /** The gateway's own hooks: trusted (no failure guard), and they get no request view. */
  readonly builtin: boolean
  /** A guard: its failure refuses the request (`RequestHook.failClosed`). */
  readonly failClosed: boolean
  /** `RequestHook.wants`: undefined when the hook may act on every request. */
  readonly wants: ((model: string, apiKeyId: string | null) => boolean) | undefined
}

/** Every event's handlers in run order; a new table on every change, so a request keeps the one it started with. */
export type HookTable = { readonly [K in HookEvent]: ReadonlyArray<HookEntry<HookEvents[K]>> } & {
  /** The lifecycle's listeners (observability, webhooks' request events, the inspector), in registration order. */
  readonly listeners: ReadonlyArray<LifecycleListener>
  /** Runs what write-path handlers return as an Effect, and logs failures of synchronous ones. */
  readonly runtime: Runtime.Runtime<never> | undefined
}

const NONE: ReadonlyArray<never> = Object.freeze([])

export const emptyTable = (runtime: Runtime.Runtime<never> | undefined, listeners: ReadonlyArray<LifecycleListener> = NONE): HookTable => ({
  listeners,
  onRequest: NONE,
  onQuotaExhaust: NONE,
  onComboResolve: NONE,
  onModelSelect: NONE,
  onAttemptStart: NONE,
  onProviderError: NONE,
  onRateLimit: NONE,
  onStreamStart: NONE,
  onFrame: NONE,
  onStreamEnd: NONE,
  onResponse: NONE,
  onError: NONE,
  runtime
})

/** No hook at all (a request context made outside the dispatcher). */
export const EMPTY_HOOKS: HookTable = emptyTable(undefined)

let sequence = 0
/** The next registration number: built-in and registered hooks share one order for ties. */
export const nextSequence = (): number => ++sequence

const before = (a: HookEntry<unknown>, b: HookEntry<unknown>): boolean =>
  a.priority < b.priority || (a.priority === b.priority && a.seq < b.seq)

const insert = <E>(list: ReadonlyArray<HookEntry<E>>, entry: HookEntry<E>): ReadonlyArray<HookEntry<E>> => {
  if (list.length === 0) return [entry]
  const out = list.slice()
  let i = out.length
  while (i > 0 && before(entry as HookEntry<unknown>, out[i - 1] as HookEntry<unknown>)) i--
  out.splice(i, 0, entry)
  return out
}

export const validated = (hook: RequestHook): void => {
  if (typeof hook !== "object" || hook === null) throw new TypeError("a hook must be an object")
  if (typeof hook.name !== "string" || hook.name.trim() === "") throw new TypeError("a hook needs a non-empty name")
  if (hook.priority !== undefined && (typeof hook.priority !== "number" || Number.isNaN(hook.priority)))
    throw new TypeError(`hook ${hook.name}: priority must be a number`)
  for (const event of HOOK_EVENTS) {
    const h = hook[event]
    if (h !== undefined && typeof h !== "function") throw new TypeError(`hook ${hook.name}: ${event} must be a function`)
  }
}

/** `table` with `hook`'s handlers inserted in order. */
export const withHook = (table: HookTable, hook: RequestHook, seq: number, builtin: boolean): HookTable => {
  const out: Record<string, unknown> = { ...table }
  const priority = hook.priority ?? DEFAULT_PRIORITY
  for (const event of HOOK_EVENTS) {
    const handler = hook[event]
    if (handler !== undefined) {
      const entry = {
        name: hook.name,
        priority,
        seq,
        handler: handler as HookHandler<unknown>,
        builtin,
        failClosed: hook.failClosed === true,
        wants: hook.wants
      }
      out[event] = insert(table[event] as ReadonlyArray<HookEntry<unknown>>, entry)
    }
  }
  return out as HookTable
}

/** The answer of one request as its transport has it so far (node's `ServerResponse` is one). */
export interface AnswerState {
  readonly statusCode: number
  readonly headersSent: boolean
}

/** The part of a request context the lifecycle reads and keeps (request.ts `RequestContext` has it). */
export interface HookHost {
  readonly requestId: string
  readonly startedAt: number
  readonly path: string
  readonly method: string
  readonly headers: RequestHeaders
  /** The answer as the transport has it so far: its status, and whether its head went out. */
  readonly answer: AnswerState
  readonly apiKeyId: string | null
  /** Headers the answer will carry (io.ts `responseHeaders`); a verdict's `headers` are added here. */
  readonly responseHeaders?: Record<string, string>
  /** The hooks of this request: the registry's table when it began, plus any attached to it alone. */
  hooks?: HookTable
  /** The request as hooks see it, made when a handler first runs. */
  hookRequest?: HookRequest
  /** A whole answer's headers and body as written (io.ts `writeWhole`); a stream's head headers. */
  answerHeaders?: Readonly<Record<string, string | number>>
  answerBody?: string | Buffer
  /** The hook that blocked the request. */
  blockedBy?: string
  /** Rewrites of the answer given at onRequest (composed), run by io.ts's writers. */
  rewrite?: AnswerRewrite
  /** A whole answer's body before `rewrite` ran (what the upstream's answer encoded to), when a rewrite changed it. */
  answerUnrewritten?: string
  /** onResponse or onError has fired. */
  ended?: boolean
}

/**
 * Adds hooks to one request only (the gateway's own per-request hooks: its usage row, the
 * response cache's entry, the idempotency recorder). Built-in hooks are trusted: their failures
 * are not caught and they get no request view.
 */
export const attach = (host: HookHost, hook: RequestHook, builtin = true): void => {
  host.hooks = withHook(host.hooks ?? EMPTY_HOOKS, hook, nextSequence(), builtin)
}
