/**
 * The gateway's plugin SDK: `import { definePlugin, blockRequest, modifyBody, addMetadata } from "gateway/plugin-sdk"`.
 * docs/plugins.md says how plugins are installed, configured and confined; these types say what
 * each hook receives and may answer.
 */

/** Where a request goes: `key` is `<connection>/<model>` as in the X-Gateway headers and logs. */
export interface Target {
  readonly key: string
  /** The provider id (`openai`, `anthropic`, `openai-compatible`, ...). */
  readonly provider: string
  /** The connection's name. */
  readonly connection: string
  readonly model: string
}

/** What every request-path hook receives (spec: requestId, model, provider, body, headers, metadata, timestamp). */
export interface RequestContext {
  /** The hook being called. */
  readonly hook: RequestHookName
  readonly requestId: string
  /** When the request arrived (epoch ms). */
  readonly timestamp: number
  readonly method: string
  /** The request's path (`/v1/chat/completions`, `/v1/messages`, ...). */
  readonly path: string
  /** The model: as the client asked until onModelSelect, then the model chosen. */
  readonly model: string
  /** The provider chosen (from onModelSelect on); null before. */
  readonly provider: string | null
  /** The request body as the client sent it and earlier plugins left it (the client's own format). */
  readonly body: Record<string, unknown>
  /** The request's headers, lower-case names; credentials (authorization, x-api-key, cookie, ...) masked. */
  readonly headers: Readonly<Record<string, string>>
  /** What hooks attached so far (`addMetadata`); a copy: change it by returning `addMetadata(...)`. */
  readonly metadata: Readonly<Record<string, unknown>>
  /** The gateway API key id that authenticated the request, if any. */
  readonly apiKeyId: string | null
  /** The client's wire format (`openai-chat`, `anthropic-messages`, `openai-responses`, `gemini`, `ollama`). */
  readonly format: string
  /** The endpoint's usage label (`chat.completions`, `messages`, `responses`, `generateContent`, `api.chat`, ...). */
  readonly endpoint: string
  /** Whether the client asked for a stream. */
  readonly stream: boolean
}

/** onRequest: the request arrived (before routing). May block it, replace its body, add metadata or response headers. */
export interface OnRequestContext extends RequestContext {}

/** onComboResolve: a combo, auto id or quota-share group was resolved into candidates. May block. */
export interface OnComboResolveContext extends RequestContext {
  readonly route: "combo" | "auto" | "quota-share"
  /** The combo's name, the auto id or the group. */
  readonly scope: string
  readonly strategy: string
  /** In the order they will be tried. */
  readonly candidates: ReadonlyArray<Target>
  /** Left out, and why (`circuit_open`, `cooldown`, `token_limit`, ...). */
  readonly blocked: ReadonlyArray<{ readonly target: Target; readonly reason: string }>
}

/** onModelSelect: where the request goes. May block it, replace its body, add metadata or response headers. */
export interface OnModelSelectContext extends RequestContext {
  readonly route: "direct" | "combo" | "auto" | "quota-share"
  readonly strategy: string
  /** The first candidate (null when every one is blocked). */
  readonly target: Target | null
  readonly candidates: ReadonlyArray<Target>
}

/** onProviderError and onRateLimit (a 429): one upstream attempt failed. Observes only. */
export interface OnProviderErrorContext extends RequestContext {
  /** 1 for the first attempt. */
  readonly attempt: number
  readonly target: Target
  /** The upstream's status (504 for a timeout, 502 for a refused or cut connection). */
  readonly status: number
  /** `rate_limited`, `quota_exhausted`, `server_error`, `overloaded`, `timeout`, ... */
  readonly reason: string
  /** Whether the gateway may try another target. */
  readonly retryable: boolean
  readonly message: string
}

/** onQuotaExhaust: the API key's budget is spent, or one of its token limits reached. Observes only. */
export interface OnQuotaExhaustContext extends RequestContext {
  readonly kind: "budget" | "token_limit"
  /** The budget's window (`daily`, `weekly`, `monthly`, ...); null for a token limit. */
  readonly window: string | null
  readonly spentUsd: number | null
  readonly limitUsd: number | null
  /** When the window resets, in ms from now (null when unknown). */
  readonly retryAfterMs: number | null
  /** `refused` (429 to the client) or `emergency_fallback` (sent to `fallbackModel`). */
  readonly action: "refused" | "emergency_fallback"
  readonly fallbackModel: string | null
  readonly message: string
}

/** onStreamStart: a streamed answer's head went out. Observes only. */
export interface OnStreamStartContext extends RequestContext {
  readonly status: number
  readonly responseHeaders: Readonly<Record<string, string>>
}

/** onStreamEnd: a streamed answer ended (`error` when it ended with an error event). Observes only. */
export interface OnStreamEndContext extends RequestContext {
  readonly error: string | null
}

/** What the request cost, when the gateway recorded a usage row for it. */
export interface Usage {
  readonly promptTokens: number | null
  readonly completionTokens: number | null
  readonly costUsd: number | null
  /** The provider and model that answered. */
  readonly provider: string | null
  readonly model: string | null
}

/** onResponse: the answer went out whole. Observes only. */
export interface OnResponseContext extends RequestContext {
  readonly status: number
  readonly responseHeaders: Readonly<Record<string, string>>
  /** A whole answer's text (up to 64 KiB); null for a streamed or binary answer. */
  readonly responseBody: string | null
  readonly streamed: boolean
  readonly usage: Usage | null
}

/** onError: the request ended with an error answer, or the client left (status 499). Observes only. */
export interface OnErrorContext extends RequestContext {
  readonly status: number
  readonly error: { readonly status: number; readonly code: string | null; readonly message: string } | null
  /** The hook or plugin that blocked the request, if one did. */
  readonly blockedBy: string | null
  readonly streamed: boolean
  readonly usage: Usage | null
}

/**
 * onMcpCall: a call through the gateway's MCP endpoint (`/v1/mcp`) to a registered MCP server,
 * before it goes. `blockRequest({ message })` refuses it (the client gets an MCP error naming the
 * plugin), `blockRequest({ body })` answers it with `body` instead (a tool result, `{ content: [...] }`),
 * nothing lets it go.
 */
export interface OnMcpCallContext {
  readonly hook: "onMcpCall"
  readonly server: string
  readonly kind: "tool" | "resource" | "prompt"
  /** The server's own name of the tool or prompt (a resource's URI). */
  readonly name: string
  /** The name on `/v1/mcp`: `<server>__<name>`. */
  readonly exposedName: string
  readonly arguments: unknown
  readonly apiKeyId: string
}

/** onInstall, onActivate, onDeactivate, onUninstall (before the plugin's files are deleted). */
export interface LifecycleContext {
  readonly hook: LifecycleHookName
  readonly name: string
  readonly version: string
  /** The plugin's plugin.json, decoded. */
  readonly manifest: Readonly<Record<string, unknown>>
}

export type RequestHookName =
  | "onRequest"
  | "onComboResolve"
  | "onModelSelect"
  | "onProviderError"
  | "onRateLimit"
  | "onQuotaExhaust"
  | "onStreamStart"
  | "onStreamEnd"
  | "onResponse"
  | "onError"
export type LifecycleHookName = "onInstall" | "onActivate" | "onDeactivate" | "onUninstall"

/** What `blockRequest` sends: without `body`, an error in the client's own format carrying `message`. */
export interface BlockResponse {
  /** Default 403. */
  readonly status?: number
  /** Sent as JSON as it is. */
  readonly body?: unknown
  readonly headers?: Readonly<Record<string, string>>
  readonly message?: string
  /** The error code (default `request_blocked`). */
  readonly code?: string
}

declare const RESULT: unique symbol
/** What a helper returns; a hook returns one, an array of them, or nothing (the request goes on). */
export interface HookResult {
  readonly [RESULT]: true
}

type Answer = HookResult | ReadonlyArray<HookResult> | undefined | void
type Hook<C> = (ctx: C) => Answer | Promise<Answer>

export interface PluginDefinition {
  /** kebab-case; names the plugin in logs and in `blockedBy`. */
  readonly name: string
  /** Lower runs first (default 100); the manifest's `hooks.<name>.priority` overrides it per hook. */
  readonly priority?: number
  /** Default true. */
  readonly enabled?: boolean
  readonly onRequest?: Hook<OnRequestContext>
  readonly onComboResolve?: Hook<OnComboResolveContext>
  readonly onModelSelect?: Hook<OnModelSelectContext>
  readonly onProviderError?: Hook<OnProviderErrorContext>
  readonly onRateLimit?: Hook<OnProviderErrorContext>
  readonly onQuotaExhaust?: Hook<OnQuotaExhaustContext>
  readonly onStreamStart?: Hook<OnStreamStartContext>
  readonly onStreamEnd?: Hook<OnStreamEndContext>
  readonly onResponse?: Hook<OnResponseContext>
  readonly onError?: Hook<OnErrorContext>
  readonly onMcpCall?: Hook<OnMcpCallContext>
  readonly onInstall?: (ctx: LifecycleContext) => void | Promise<void>
  readonly onActivate?: (ctx: LifecycleContext) => void | Promise<void>
  readonly onDeactivate?: (ctx: LifecycleContext) => void | Promise<void>
  readonly onUninstall?: (ctx: LifecycleContext) => void | Promise<void>
}

export interface Plugin extends PluginDefinition {
  readonly priority: number
  readonly enabled: boolean
}

/** Checks the definition and fills the defaults (priority 100, enabled true). The entry file default-exports its result. */
export declare const definePlugin: (definition: PluginDefinition) => Plugin
/** Ends the request with this answer (onRequest, onComboResolve, onModelSelect); none: 403 in the client's format. */
export declare const blockRequest: (response?: BlockResponse) => HookResult
/** Replaces the request body for what follows (onRequest, onModelSelect). */
export declare const modifyBody: (body: Record<string, unknown>) => HookResult
/** Merges into the request's metadata (any request-path hook). */
export declare const addMetadata: (metadata: Record<string, unknown>) => HookResult
/** Adds headers to the client's answer (onRequest, onModelSelect). */
export declare const addResponseHeaders: (headers: Record<string, string>) => HookResult
/** The plugin's configuration: its configSchema's fields, defaults filled. */
export declare const config: Readonly<Record<string, string | number | boolean>>
