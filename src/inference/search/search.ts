/**
 * `/v1/search` and its analytics: a search through the media runner, behind an answer cache (per API key and normalised request) and
 * one upstream call for identical searches in flight (docs/search.md, "Web search").
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import type { AccountingShape } from "../../services/accounting/Accounting.js"
import { formatCost } from "../../services/accounting/cost.js"
import { tryJson } from "../../upstream/formats/common.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import type { AttemptFailed } from "../../kernel/attempts.js"
import type { InferenceShape } from "../call.js"
import { badRequest, type InferenceError } from "../../kernel/errors.js"
import type { AttemptRequest } from "../fallback.js"
import { type HttpRequestContext, sendJson } from "../io.js"
import { badAnswer, does, headerValue, mediaBytes, type MediaOutcome, runMedia, sendMedia } from "../media/run.js"
import type { Connection } from "../../upstream/providers/Connections.js"
import type { Blocked, RoutePlan } from "../../services/routing/plan.js"
import type { Candidate } from "../../services/routing/types.js"
import {
  CAPABILITIES,
  DEFAULT_RESULTS,
  enforce,
  isSearchFamily,
  MAX_RESULTS,
  readSearch,
  SEARCH_FAMILIES,
  SEARCH_MODEL,
  searchCall,
  type SearchAsk,
  type SearchDepth,
  type SearchFamily,
  searchUnits,
  TIME_RANGES,
  type TimeRange,
  type Topic
} from "./providers.js"
import type { StoredAnswer, WebSearchShape } from "./WebSearch.js"

export const MAX_QUERY_CHARS = 2000
const MAX_DOMAINS = 50

const fail = (message: string, param: string): Effect.Effect<never, InferenceError> => Effect.fail(badRequest(message, param))

/** What the client asked: the search itself and, when it named any, the providers in the order to try them. */
export interface SearchRequest {
  readonly ask: SearchAsk
  /** Connection names or provider ids, with the request field that named each (for a 400). */
  readonly named: ReadonlyArray<{ readonly name: string; readonly param: string }> | undefined
}

const domains = (v: unknown, param: string): Effect.Effect<ReadonlyArray<string>, InferenceError> => {
  if (v === undefined || v === null) return Effect.succeed([])
  if (!Array.isArray(v)) return fail(`${param} must be an array of domain names`, param)
  if (v.length > MAX_DOMAINS) return fail(`${param} may hold at most ${MAX_DOMAINS} domains (got ${v.length})`, param)
  const out: Array<string> = []
  for (let i = 0; i < v.length; i++) {
    const d = typeof v[i] === "string" ? (v[i] as string).trim().toLowerCase().replace(/^\*\./, "") : undefined
    if (!d || d.length > 253 || !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(d))
      return fail(`${param}[${i}] must be a domain name such as example.com`, `${param}[${i}]`)
    if (!out.includes(d)) out.push(d)
  }
  return Effect.succeed(out.sort())
}

/** The request body, checked field by field: a 400 names the first field that is wrong. */
export const parseSearch = (body: Record<string, unknown>): Effect.Effect<SearchRequest, InferenceError> =>
  Effect.gen(function* () {
    const q = body["query"]
    if (typeof q !== "string" || q.trim() === "") return yield* fail("query must be a non-empty string", "query")
    if (q.length > MAX_QUERY_CHARS) return yield* fail(`query may be at most ${MAX_QUERY_CHARS} characters (got ${q.length})`, "query")
    const max = body["max_results"]
    if (max !== undefined && max !== null && !(typeof max === "number" && Number.isInteger(max) && max >= 1 && max <= MAX_RESULTS)) {
      return yield* fail(`max_results must be an integer from 1 to ${MAX_RESULTS}`, "max_results")
    }
    const depth = body["search_depth"]
    if (depth !== undefined && depth !== null && depth !== "basic" && depth !== "advanced")
      return yield* fail("search_depth must be basic or advanced", "search_depth")
    const range = body["time_range"]
    if (range !== undefined && range !== null && !(typeof range === "string" && (TIME_RANGES as ReadonlyArray<string>).includes(range))) {
      return yield* fail(`time_range must be one of ${TIME_RANGES.join(", ")}`, "time_range")
    }
    const topic = body["topic"]
    if (topic !== undefined && topic !== null && topic !== "general" && topic !== "news" && topic !== "finance")
      return yield* fail("topic must be general, news or finance", "topic")
    const includeDomains = yield* domains(body["include_domains"], "include_domains")
    const excludeDomains = yield* domains(body["exclude_domains"], "exclude_domains")
    const provider = body["provider"]
    const providers = body["providers"]
    let named: Array<{ name: string; param: string }> | undefined
    if (provider !== undefined && provider !== null) {
      if (providers !== undefined && providers !== null) return yield* fail("give provider or providers, not both", "providers")
      if (typeof provider !== "string" || provider.trim() === "")
        return yield* fail("provider must be a connection name or a search provider id", "provider")
      named = [{ name: provider.trim(), param: "provider" }]
    } else if (providers !== undefined && providers !== null) {
      if (!Array.isArray(providers) || providers.length === 0)
        return yield* fail("providers must be a non-empty array of connection names or search provider ids", "providers")
      if (providers.length > 10) return yield* fail("providers may name at most 10 providers", "providers")
      named = []
      for (let i = 0; i < providers.length; i++) {
        const p = providers[i]
        if (typeof p !== "string" || p.trim() === "")
          return yield* fail(`providers[${i}] must be a connection name or a search provider id`, `providers[${i}]`)
        named.push({ name: p.trim(), param: `providers[${i}]` })
      }
    }
    return {
      ask: {
        query: q.trim(),
        maxResults: typeof max === "number" ? max : DEFAULT_RESULTS,
        searchDepth: (depth ?? "basic") as SearchDepth,
        includeDomains,
        excludeDomains,
        timeRange: (range ?? undefined) as TimeRange | undefined,
        topic: (topic ?? undefined) as Topic | undefined
      },
      named
    }
  })

const isSearchConnection = (c: Connection): boolean => isSearchFamily(c.provider.id)
const byOrder = (a: Connection, b: Connection) => a.priority - b.priority || a.createdAt - b.createdAt || a.name.localeCompare(b.name)

/** The search connections in the default order: enabled ones, by connection priority, then the oldest first. */
export const searchConnections = (all: ReadonlyArray<Connection>): Array<Connection> => all.filter(isSearchConnection).sort(byOrder)

/**
 * The model ids to plan, in the order to try them: `<connection>/search` for a connection name,
 * `<provider>/search` for a provider id (its enabled connections, in the router's order); every
 * enabled search connection when none is named.
 */
export const searchTargets = (
  all: ReadonlyArray<Connection>,
  named: SearchRequest["named"]
): Effect.Effect<ReadonlyArray<string>, InferenceError> =>
  Effect.gen(function* () {
    const search = searchConnections(all)
    if (!named) {
      const enabled = search.filter((c) => c.enabled)
      if (enabled.length === 0) {
        return yield* fail(
          `no search provider is configured: add a connection of ${SEARCH_FAMILIES.join(", ")} with POST /api/providers`,
          "provider"
        )
      }
      return enabled.map((c) => `${c.name}/${SEARCH_MODEL}`)
    }
    const models: Array<string> = []
    for (const { name, param } of named) {
      const lower = name.toLowerCase()
      const connection = all.find((c) => c.name.toLowerCase() === lower)
      if (connection) {
        if (!isSearchConnection(connection))
          return yield* fail(
            `${param}: connection '${connection.name}' is a ${connection.provider.id} connection, not a search provider`,
            param
          )
        if (!connection.enabled) return yield* fail(`${param}: connection '${connection.name}' is disabled`, param)
        models.push(`${connection.name}/${SEARCH_MODEL}`)
      } else if (isSearchFamily(lower)) {
        if (!search.some((c) => c.enabled && c.provider.id === lower))
          return yield* fail(`${param}: search provider ${lower} has no enabled connection (add one with POST /api/providers)`, param)
        models.push(`${lower}/${SEARCH_MODEL}`)
      } else {
        return yield* fail(
          `${param}: unknown search provider '${name}': name a search connection or one of ${SEARCH_FAMILIES.join(", ")}`,
          param
        )
      }
    }
    return models
  })

/** The cache and coalescing key: the API key and the normalised request (query trimmed, spaces collapsed, lower case; domains sorted). */
export const searchKey = (apiKeyId: string | null, targets: ReadonlyArray<string>, ask: SearchAsk): string =>
  crypto
    .createHash("sha256")
    .update(
      JSON.stringify([
        apiKeyId ?? "",
        targets.map((t) => t.toLowerCase()),
        ask.query.replace(/\s+/g, " ").toLowerCase(),
        ask.maxResults,
        ask.searchDepth,
        ask.includeDomains,
        ask.excludeDomains,
        ask.timeRange ?? null,
        ask.topic ?? null
      ])
    )
    .digest("hex")

/** The targets' plans one after another: candidates in target order (a candidate once), blocked ones and probes kept. */
const fallbackPlan = (inference: InferenceShape, targets: ReadonlyArray<string>): Effect.Effect<RoutePlan, InferenceError> =>
  Effect.gen(function* () {
    const candidates: Array<Candidate> = []
    const blocked: Array<Blocked> = []
    const probes = new Set<string>()
    const seen = new Set<string>()
    for (let i = 0; i < targets.length; i++) {
      const plan = yield* inference.plan(targets[i]!, openAiChat)
      for (const c of plan.candidates) if (!seen.has(c.key)) seen.add(c.key), candidates.push({ ...c, targetIndex: i })
      for (const b of plan.blocked) if (!seen.has(b.candidate.key)) seen.add(b.candidate.key), blocked.push(b)
      for (const p of plan.probes) probes.add(p)
    }
    return {
      kind: targets.length > 1 ? "combo" : "direct",
      scope: targets.length > 1 ? `search:${targets.join(",")}` : targets[0]!,
      strategy: targets.length > 1 ? "priority" : "direct",
      candidates,
      blocked,
      probes
    }
  })

interface SearchAttempt extends AttemptRequest {
  readonly ask: SearchAsk
}

interface Searched extends MediaOutcome {
  readonly results: StoredAnswer["results"]
}

const searches = does("search")
const able = (c: Candidate): boolean => isSearchFamily(c.connection.provider.id) && searches(c)

/** One try against one candidate, counted in the analytics (latency, a hit when it found anything, an error when it failed). */
const trySearch =
  (inference: InferenceShape, ws: WebSearchShape) =>
  (request: SearchAttempt, c: Candidate): Effect.Effect<Searched, AttemptFailed> => {
    const family = c.connection.provider.id as SearchFamily
    const started = Date.now()
    const { ask } = request
    return Effect.gen(function* () {
      const res = yield* sendMedia(inference, request, c, searchCall(family, ask, started))
      const bytes = yield* mediaBytes(inference, request, c.connection, res)
      const read = readSearch(family, tryJson(bytes.toString("utf8")))
      if (!read) return yield* Effect.fail(badAnswer(request, c.connection, `the ${family} answer has no result list`))
      const results = enforce(ask, read)
      return {
        status: 200,
        usage: undefined,
        ttftMs: null,
        error: null,
        headers: headerValue(res.headers),
        units: { searches: searchUnits(family, ask) },
        results
      }
    }).pipe(
      Effect.tap((s) =>
        Effect.sync(() => ws.recordCall(c.connection.name, family, Date.now() - started, s.results.length > 0 ? "hit" : "empty"))
      ),
      Effect.tapError(() => Effect.sync(() => ws.recordCall(c.connection.name, family, Date.now() - started, "error")))
    )
  }

const answerOf = (stored: StoredAnswer, query: string, cached: boolean) => ({
  id: stored.id,
  object: "search.result",
  provider: stored.provider,
  connection: stored.connection,
  query,
  results: stored.results,
  cached
})

/** An answer from the cache or from an identical search in flight: no upstream call, cost 0, its usage row marked a cache hit. */
const answerShared = (
  inference: InferenceShape,
  accounting: AccountingShape,
  ctx: HttpRequestContext,
  stored: StoredAnswer,
  query: string,
  model: string
) =>
  Effect.gen(function* () {
    inference.track(ctx, "search")
    yield* accounting.finish({
      requestId: ctx.requestId,
      apiKeyId: ctx.apiKeyId,
      connectionId: null,
      provider: stored.provider,
      model: SEARCH_MODEL,
      endpoint: "search",
      stream: false,
      status: 200,
      usage: { input: null, output: null, cached: null, reasoning: null },
      latencyMs: Date.now() - ctx.startedAt,
      ttftMs: null,
      error: null,
      fallbackAttempts: 0,
      cacheHit: true,
      requestedModel: model,
      units: {}
    })
    const h = ctx.responseHeaders
    h["x-gateway-response-cost"] = formatCost(0)
    h["x-gateway-tokens-in"] = "0"
    h["x-gateway-tokens-out"] = "0"
    h["x-gateway-model"] = SEARCH_MODEL
    h["x-gateway-provider"] = stored.provider
    h["x-gateway-latency-ms"] = String(Date.now() - ctx.startedAt)
    h["x-gateway-cache-hit"] = "true"
    sendJson(ctx, 200, answerOf(stored, query, true))
  })

/** `POST /v1/search`. */
export const search =
  (inference: InferenceShape, accounting: AccountingShape, connections: Effect.Effect<ReadonlyArray<Connection>>, ws: WebSearchShape) =>
  (ctx: HttpRequestContext, body: Record<string, unknown>): Effect.Effect<void, InferenceError> =>
    Effect.gen(function* () {
      const { ask, named } = yield* parseSearch(body)
      const targets = yield* searchTargets(yield* connections, named)
      const model = targets[0]!
      const key = searchKey(ctx.apiKeyId, targets, ask)
      if (ws.ttlMs > 0) {
        const hit = ws.cache.get(key)
        if (hit) {
          ws.recordRequest("cached")
          ws.recordCache(hit.connection, hit.provider, true)
          return yield* answerShared(inference, accounting, ctx, hit, ask.query, model)
        }
      }
      const waiting = ws.inFlight.get(key)
      if (waiting) {
        const shared = yield* Deferred.await(waiting)
        // The search it waited for was given up (its client left): this request searches itself.
        if (shared) {
          ws.recordRequest("coalesced")
          ws.recordCache(shared.connection, shared.provider, true)
          return yield* answerShared(inference, accounting, ctx, shared, ask.query, model)
        }
      }
      const mine = yield* Deferred.make<StoredAnswer | undefined, InferenceError>()
      ws.inFlight.set(key, mine)
      yield* Effect.gen(function* () {
        const { outcome, candidate } = yield* runMedia(inference, accounting, {
          ctx,
          client: openAiChat,
          model,
          endpoint: "search",
          what: "web search",
          able,
          plan: fallbackPlan(inference, targets),
          request: { ctx, format: openAiChat, model, ask },
          attempt: trySearch(inference, ws)
        })
        const stored: StoredAnswer = {
          id: `search_${crypto.randomUUID().replace(/-/g, "")}`,
          provider: candidate.connection.provider.id,
          connection: candidate.connection.name,
          results: outcome.results
        }
        if (ws.ttlMs > 0) ws.cache.set(key, stored)
        ws.recordRequest("upstream")
        ws.recordCache(stored.connection, stored.provider, false)
        yield* Deferred.succeed(mine, stored)
        sendJson(ctx, 200, answerOf(stored, ask.query, false))
      }).pipe(
        Effect.tapError((e) => Deferred.fail(mine, e)),
        Effect.onInterrupt(() => Deferred.succeed(mine, undefined)),
        Effect.ensuring(
          Effect.sync(() => {
            if (ws.inFlight.get(key) === mine) ws.inFlight.delete(key)
          })
        )
      )
    })

/** `GET /v1/search`: the search connections, in the default order, and what each honours. */
export const listSearchProviders =
  (accounting: AccountingShape, connections: Effect.Effect<ReadonlyArray<Connection>>, ws: WebSearchShape) => (ctx: HttpRequestContext) =>
    Effect.gen(function* () {
      const all = searchConnections(yield* connections)
      let order = 0
      sendJson(ctx, 200, {
        object: "list",
        data: all.map((c) => {
          const family = c.provider.id as SearchFamily
          return {
            connection: c.name,
            provider: family,
            name: c.provider.name,
            enabled: c.enabled,
            // Place in the fallback order used when a request names no provider (null: disabled, not tried).
            default_order: c.enabled ? order++ : null,
            model: `${c.name}/${SEARCH_MODEL}`,
            capabilities: {
              fields: CAPABILITIES[family],
              search_depth: family === "tavily" ? ["basic", "advanced"] : ["basic"],
              time_range: TIME_RANGES,
              max_results: MAX_RESULTS
            },
            price_per_search_unit_usd: accounting.mediaCost(family, SEARCH_MODEL, undefined, { searches: 1 }),
            units_per_search: family === "tavily" ? { basic: 1, advanced: 2 } : { basic: 1 }
          }
        }),
        enforced_by_gateway: ["max_results", "include_domains", "exclude_domains"],
        cache: { ttl_seconds: ws.ttlMs / 1000, max_entries: ws.cache.maxEntries }
      })
    })

/** `GET /v1/search/analytics`: in memory, since this process started. */
export const searchAnalytics = (ws: WebSearchShape) => (ctx: HttpRequestContext) =>
  Effect.sync(() => sendJson(ctx, 200, { object: "search.analytics", scope: "this process, since it started", ...ws.analytics() }))
