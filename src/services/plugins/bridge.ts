/**
 * A running plugin as hooks of the request lifecycle: what each hook receives and how its answer becomes a verdict;
 * only the awaited hooks can slow a request (docs/plugins.md#hooks-and-what-they-receive). Plugins attach here only.
 */
import * as Effect from "effect/Effect"
import type { HookRequest, HookReturn, HookTarget, HookVerdict, RequestHook } from "../../kernel/hooks.js"
import { maskHeaders } from "../inspector/bodies.js"
import type { McpCallHook } from "../mcp/McpCallHooks.js"
import type { PluginHook } from "./sandbox/protocol.js"

/** The request-path hooks, in the order a request meets them. */
export const REQUEST_PATH_HOOKS = [
  "onRequest",
  "onQuotaExhaust",
  "onComboResolve",
  "onModelSelect",
  "onProviderError",
  "onRateLimit",
  "onStreamStart",
  "onStreamEnd",
  "onResponse",
  "onError"
] as const satisfies ReadonlyArray<PluginHook>
export type RequestPathHook = (typeof REQUEST_PATH_HOOKS)[number]

const AWAITED: ReadonlySet<string> = new Set(["onRequest", "onComboResolve", "onModelSelect"])

/** The code of the refusal when a fail-closed plugin cannot answer (docs/errors.md). */
export const PLUGIN_UNAVAILABLE = "plugin_unavailable"

/** A plugin as the bridge calls it: the service (./Plugins.ts) counts, limits and times each call. */
export interface PluginCaller {
  readonly name: string
  readonly failClosed: boolean
  /** The hook's answer (null: nothing), or a rejection saying why (threw, timed out, not running, over its rate). */
  readonly call: (hook: PluginHook, ctx: Record<string, unknown>) => Promise<unknown>
  /** A call failed and the plugin is not fail-closed: logged by the service. */
  readonly skipped: (hook: PluginHook, reason: string) => void
}

/** What later hooks of one request need to know of earlier ones (model, provider, body), kept per request. */
interface Known {
  model: string
  provider: string | null
  body: Record<string, unknown>
  format: string
  endpoint: string
  stream: boolean
  headers: Record<string, string> | undefined
}

const known = new WeakMap<HookRequest, Known>()

const flat = (headers: HookRequest["headers"]): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const k in headers) {
    const v = headers[k]
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : String(v)
  }
  return out
}

const knownOf = (req: HookRequest): Known => {
  let k = known.get(req)
  if (k === undefined) {
    k = { model: "", provider: null, body: {}, format: "", endpoint: "", stream: false, headers: undefined }
    known.set(req, k)
  }
  return k
}

/**
 * The hook that keeps `Known` for the plugins' later hooks: last on onRequest and onModelSelect
 * (it sees the body and model the plugins before it left). Registered only while a plugin runs.
 */
export const contextTracker: RequestHook = {
  name: "plugins",
  priority: Number.MAX_SAFE_INTEGER,
  onRequest: (e, req) => {
    const k = knownOf(req)
    k.model = e.model
    k.body = e.body as Record<string, unknown>
    k.format = e.format
    k.endpoint = e.endpoint
    k.stream = e.stream
  },
  onModelSelect: (e, req) => {
    const k = knownOf(req)
    if (e.target) {
      k.model = e.target.model
      k.provider = e.target.provider
    }
    k.body = e.body as Record<string, unknown>
  }
}

const target = (t: HookTarget | undefined) =>
  t === undefined ? null : { key: t.key, provider: t.provider, connection: t.connection, model: t.model }

const stringHeaders = (h: Readonly<Record<string, string | number>> | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  if (h) for (const k in h) out[k.toLowerCase()] = String(h[k])
  return maskHeaders(out)
}

const MAX_RESPONSE_BODY = 64 * 1024

const usageOf = (
  u:
    | { usage: { input: number | null; output: number | null }; costUsd?: number | null; provider: string | null; model: string | null }
    | undefined
) =>
  u === undefined
    ? null
    : { promptTokens: u.usage.input, completionTokens: u.usage.output, costUsd: u.costUsd ?? null, provider: u.provider, model: u.model }

/** The context every request-path hook gets, plus the event's own fields. */
const contextOf = (hook: RequestPathHook, req: HookRequest, own: Record<string, unknown>): Record<string, unknown> => {
  const k = knownOf(req)
  k.headers ??= maskHeaders(flat(req.headers))
  return {
    hook,
    requestId: req.requestId,
    timestamp: req.timestamp,
    method: req.method,
    path: req.path,
    model: k.model,
    provider: k.provider,
    body: k.body,
    headers: k.headers,
    metadata: req.metadata,
    apiKeyId: req.apiKeyId,
    format: k.format,
    endpoint: k.endpoint,
    stream: k.stream,
    ...own
  }
}

/** Each event's own fields (and, for onRequest and onModelSelect, the model and body it carries). */
const payloads: { readonly [K in RequestPathHook]: (event: any) => Record<string, unknown> } = {
  onRequest: (e) => ({ model: e.model, body: e.body, format: e.format, endpoint: e.endpoint, stream: e.stream }),
  onQuotaExhaust: (e) => ({
    kind: e.kind,
    window: e.window,
    spentUsd: e.spentUsd,
    limitUsd: e.limitUsd,
    retryAfterMs: e.retryAfterMs,
    action: e.action,
    fallbackModel: e.fallbackModel,
    message: e.message
  }),
  onComboResolve: (e) => ({
    route: e.route,
    scope: e.scope,
    strategy: e.strategy,
    candidates: e.candidates.map(target),
    blocked: e.blocked.map((b: { target: HookTarget; reason: string }) => ({ target: target(b.target), reason: b.reason })),
    fusion: e.fusion
  }),
  onModelSelect: (e) => ({
    ...(e.target ? { model: e.target.model, provider: e.target.provider } : {}),
    body: e.body,
    route: e.route,
    strategy: e.strategy,
    target: target(e.target),
    candidates: e.candidates.map(target)
  }),
  onProviderError: (e) => ({
    attempt: e.attempt,
    target: target(e.target),
    status: e.status,
    reason: e.reason,
    retryable: e.retryable,
    message: e.message,
    answered: e.answered
  }),
  onRateLimit: (e) => ({
    attempt: e.attempt,
    target: target(e.target),
    status: e.status,
    reason: e.reason,
    retryable: e.retryable,
    message: e.message,
    answered: e.answered
  }),
  onStreamStart: (e) => ({ status: e.status, responseHeaders: stringHeaders(e.headers) }),
  onStreamEnd: (e) => ({ error: e.error }),
  onResponse: (e) => ({
    status: e.status,
    responseHeaders: stringHeaders(e.headers),
    responseBody: typeof e.body === "string" ? (e.body.length > MAX_RESPONSE_BODY ? e.body.slice(0, MAX_RESPONSE_BODY) : e.body) : null,
    streamed: e.streamed,
    usage: usageOf(e.usage)
  }),
  onError: (e) => ({
    status: e.status,
    error: e.error ?? null,
    blockedBy: e.blockedBy ?? null,
    streamed: e.streamed,
    usage: usageOf(e.usage)
  })
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** What a plugin hook answered (one helper's result, an array of them, or nothing) as a verdict of the seam. */
export const verdictOf = (answer: unknown): HookVerdict | undefined => {
  if (answer === null || answer === undefined) return undefined
  const results = Array.isArray(answer) ? answer : [answer]
  const out: {
    body?: Record<string, unknown>
    block?: HookVerdict["block"]
    metadata?: Record<string, unknown>
    headers?: Record<string, string>
  } = {}
  for (const r of results) {
    if (!isObject(r))
      throw new TypeError("a hook returns blockRequest(), modifyBody(), addMetadata(), addResponseHeaders(), an array of them, or nothing")
    switch (r["__gateway"]) {
      case "block": {
        const res = isObject(r["response"]) ? r["response"] : {}
        out.block = {
          ...(typeof res["status"] === "number" ? { status: res["status"] } : {}),
          ...(res["body"] !== undefined ? { body: res["body"] } : {}),
          ...(isObject(res["headers"])
            ? { headers: Object.fromEntries(Object.entries(res["headers"]).map(([k, v]) => [k, String(v)])) }
            : {}),
          ...(typeof res["message"] === "string" ? { message: res["message"] } : {}),
          ...(typeof res["code"] === "string" ? { code: res["code"] } : {})
        }
        break
      }
      case "modify":
        if (!isObject(r["body"])) throw new TypeError("modifyBody takes a JSON object")
        out.body = r["body"]
        break
      case "metadata":
        if (!isObject(r["metadata"])) throw new TypeError("addMetadata takes an object")
        out.metadata = { ...out.metadata, ...r["metadata"] }
        break
      case "headers":
        if (!isObject(r["headers"])) throw new TypeError("addResponseHeaders takes an object of strings")
        out.headers = { ...out.headers, ...Object.fromEntries(Object.entries(r["headers"]).map(([k, v]) => [k, String(v)])) }
        break
      default:
        throw new TypeError(
          "a hook returns blockRequest(), modifyBody(), addMetadata(), addResponseHeaders(), an array of them, or nothing"
        )
    }
  }
  return out
}

/** A fail-closed plugin that could not answer: the request is refused, naming it. */
const unavailable = (plugin: string, reason: string): HookVerdict => ({
  block: {
    status: 503,
    code: PLUGIN_UNAVAILABLE,
    message: `the request was not sent: the plugin ${plugin} could not check it (${reason}); it is fail-closed. Try again; the operator sees the plugin's status in GET /api/plugins/${plugin}`,
    headers: { "retry-after": "1" }
  }
})

/**
 * A plugin's `onMcpCall` as a hook of the calls through `/v1/mcp` (docs/plugins.md, "onMcpCall"):
 * `blockRequest({ message })` refuses the call, `blockRequest({ body })` answers it with `body`
 * (a tool's result: `{content: [...]}`), nothing lets it go. A plugin that cannot answer lets the
 * call go, unless it is fail-closed: then the call is refused, naming it.
 */
export const mcpCallHookOf = (caller: PluginCaller): McpCallHook => ({
  name: caller.name,
  onMcpCall: (call) =>
    caller.call("onMcpCall", { hook: "onMcpCall", ...call }).then(
      (answer) => {
        const block = verdictOf(answer)?.block
        if (block === undefined) return undefined
        return block.body !== undefined ? { result: block.body } : { block: true, message: block.message ?? "blocked" }
      },
      (e: unknown) => {
        const reason = e instanceof Error ? e.message : String(e)
        if (caller.failClosed) return { block: true, message: `plugin ${caller.name} could not answer (${reason}); it is fail-closed` }
        caller.skipped("onMcpCall", reason)
        return undefined
      }
    )
})

/**
 * The seam hooks of one plugin: one per priority its hooks run at (the manifest may set a priority
 * per hook), each named after the plugin.
 */
export const hooksOf = (
  caller: PluginCaller,
  hooks: ReadonlyArray<{ readonly hook: RequestPathHook; readonly priority: number }>
): ReadonlyArray<RequestHook> => {
  const byPriority = new Map<number, Record<string, unknown>>()
  for (const { hook, priority } of hooks) {
    const group = byPriority.get(priority) ?? { name: caller.name, priority }
    byPriority.set(priority, group)
    const toCtx = payloads[hook]
    group[hook] = AWAITED.has(hook)
      ? (event: unknown, req: HookRequest): Effect.Effect<HookReturn> =>
          Effect.promise(() =>
            caller.call(hook, contextOf(hook, req, toCtx(event))).then(
              (answer) => {
                try {
                  return verdictOf(answer)
                } catch (e) {
                  const reason = `its answer was refused: ${(e as Error).message}`
                  if (caller.failClosed) return unavailable(caller.name, reason)
                  caller.skipped(hook, reason)
                  return undefined
                }
              },
              (e: unknown) => {
                const reason = e instanceof Error ? e.message : String(e)
                if (caller.failClosed) return unavailable(caller.name, reason)
                caller.skipped(hook, reason)
                return undefined
              }
            )
          )
      : (event: unknown, req: HookRequest): HookReturn => {
          caller.call(hook, contextOf(hook, req, toCtx(event))).then(
            (answer) => {
              // An observer's metadata reaches the request when it arrives (hooks after it may have run).
              try {
                const v = verdictOf(answer)
                if (v?.metadata) Object.assign(req.metadata, v.metadata)
              } catch (e) {
                caller.skipped(hook, `its answer was refused: ${(e as Error).message}`)
              }
            },
            (e: unknown) => caller.skipped(hook, e instanceof Error ? e.message : String(e))
          )
          return undefined
        }
  }
  return [...byPriority.values()] as unknown as ReadonlyArray<RequestHook>
}
