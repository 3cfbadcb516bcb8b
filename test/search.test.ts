import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeSearch, PUBLISHED } from "./support/fakeSearch.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Web search (docs/search.md, "Web search") against fake Tavily, Brave, Exa, SearXNG and Serper
 * upstreams on loopback that check the exact request they get (path, credential header, fields).
 * The openai SDK has no search method: raw HTTP.
 */
const ADMIN = "gwk_search_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeSearch
/** Answers 503 to everything, its error body echoing the key it was sent. */
let down: FakeSearch

const search = (body: unknown, headers: Record<string, string> = {}) => call(`${gw.url}/v1/search`, { body, headers })

const usageRow = async (requestId: string | null) => {
  await gw.usageWritten()
  const [row] = queryDb(
    gw.dataDir,
    "SELECT endpoint, status, provider, model, cost_usd, fallback_attempts, cache_hit FROM usage WHERE request_id = ?",
    requestId
  )
  return row as Record<string, any> | undefined
}

const expectNoKey = (text: string) => {
  expect(text).not.toContain(up.key)
  expect(text).not.toContain(down.key)
}

beforeAll(async () => {
  up = await FakeSearch.start()
  down = await FakeSearch.start("sk-down-search-key-fedcba9876543210")
  down.always(503)
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    expectNoKey(res.text)
  }
  // Created in this order: with equal priorities, the default order is the order of creation.
  await add({ provider: "tavily", name: "tav", baseUrl: up.baseUrl("tavily"), apiKey: up.key })
  await add({ provider: "brave", name: "brv", baseUrl: up.baseUrl("brave"), apiKey: up.key })
  await add({ provider: "exa", name: "exa1", baseUrl: up.baseUrl("exa"), apiKey: up.key })
  await add({ provider: "searxng", name: "sx", baseUrl: up.baseUrl("searxng") })
  await add({ provider: "serper", name: "srp", baseUrl: up.baseUrl("serper"), apiKey: up.key })
  await add({ provider: "tavily", name: "tav-down", baseUrl: down.baseUrl("tavily"), apiKey: down.key })
  // The analytics test's own pair, so no other test moves its figures.
  await add({ provider: "serper", name: "stats-ok", baseUrl: up.baseUrl("serper"), apiKey: up.key })
  await add({ provider: "brave", name: "stats-down", baseUrl: down.baseUrl("brave"), apiKey: down.key })
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
  await down?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  up.delayMs = 0
})

describe("GET /v1/search", () => {
  it("lists the search connections in the default order with the fields each honours, and no key", async () => {
    const res = await call(`${gw.url}/v1/search`)
    expect(res.status, res.text).toBe(200)
    expectNoKey(res.text)
    const byName = Object.fromEntries(res.body.data.map((d: any) => [d.connection, d]))
    expect(res.body.data.map((d: any) => d.connection)).toEqual(["tav", "brv", "exa1", "sx", "srp", "tav-down", "stats-ok", "stats-down"])
    expect(res.body.data.map((d: any) => d.default_order)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(byName["tav"]).toMatchObject({
      provider: "tavily",
      model: "tav/search",
      enabled: true,
      capabilities: {
        fields: expect.arrayContaining(["search_depth", "include_domains", "exclude_domains", "time_range"]),
        search_depth: ["basic", "advanced"],
        max_results: 20
      },
      price_per_search_unit_usd: 0.008,
      units_per_search: { basic: 1, advanced: 2 }
    })
    expect(byName["brv"].capabilities.fields).toEqual(["query", "max_results", "time_range"])
    expect(byName["sx"]).toMatchObject({
      provider: "searxng",
      price_per_search_unit_usd: 0,
      capabilities: { fields: ["query", "time_range"] }
    })
    expect(res.body.enforced_by_gateway).toEqual(["max_results", "include_domains", "exclude_domains"])
    expect(res.body.cache).toEqual({ ttl_seconds: 300, max_entries: 1000 })
  })
})

describe("POST /v1/search: each provider's wire shape, one normalised answer", () => {
  it("Tavily: POST /search with a bearer key and its own field names; priced per credit, advanced is two", async () => {
    const res = await search({
      query: "effect typescript",
      provider: "tav",
      max_results: 3,
      include_domains: ["News.Example.org", "docs.example.com"],
      time_range: "month",
      topic: "news"
    })
    expect(res.status, res.text).toBe(200)
    const sent = up.last("tavily")!
    expect(sent.method).toBe("POST")
    expect(sent.path).toBe("/search")
    expect(sent.headers.authorization).toBe(`Bearer ${up.key}`)
    expect(sent.body).toEqual({
      query: "effect typescript",
      max_results: 3,
      search_depth: "basic",
      topic: "news",
      time_range: "month",
      include_domains: ["docs.example.com", "news.example.org"]
    })
    expect(res.body).toMatchObject({
      object: "search.result",
      provider: "tavily",
      connection: "tav",
      query: "effect typescript",
      cached: false
    })
    expect(res.body.id).toMatch(/^search_/)
    expect(res.body.results.length).toBeGreaterThan(0)
    for (const r of res.body.results) {
      expect(Object.keys(r).sort()).toEqual(["published_at", "score", "snippet", "title", "url"])
      expect(new URL(r.url).hostname).toMatch(/^(docs\.example\.com|news\.example\.org)$/)
      expect(r.published_at).toBe(PUBLISHED)
      expect(typeof r.score).toBe("number")
      expect(r.snippet).toMatch(/^About effect typescript/)
    }
    expect(res.headers.get("x-gateway-response-cost")).toBe("0.0080000000")
    expect(res.headers.get("x-gateway-provider")).toBe("tavily")
    expect(res.headers.get("x-gateway-model")).toBe("search")
    expect(res.headers.get("x-gateway-cache-hit")).toBe("false")
    expect(await usageRow(res.headers.get("x-gateway-request-id"))).toMatchObject({
      endpoint: "search",
      status: 200,
      provider: "tavily",
      model: "search",
      cost_usd: 0.008,
      fallback_attempts: 0
    })

    const deep = await search({ query: "effect typescript", provider: "tavily", search_depth: "advanced" })
    expect(deep.status, deep.text).toBe(200)
    expect(up.last("tavily")!.body).toEqual({ query: "effect typescript", max_results: 5, search_depth: "advanced", topic: "general" })
    expect(deep.body.results).toHaveLength(5)
    expect(deep.headers.get("x-gateway-response-cost")).toBe("0.0160000000")
  })

  it("Brave: GET /res/v1/web/search?q&count&freshness with X-Subscription-Token; snippets as plain text", async () => {
    const res = await search({ query: "brave new world", provider: "brave", max_results: 4, time_range: "week" })
    expect(res.status, res.text).toBe(200)
    const sent = up.last("brave")!
    expect(sent.method).toBe("GET")
    expect(sent.path).toBe("/res/v1/web/search")
    expect(sent.params).toEqual({ q: "brave new world", count: "4", freshness: "pw" })
    expect(sent.headers["x-subscription-token"]).toBe(up.key)
    expect(sent.headers.authorization).toBeUndefined()
    expect(res.body.provider).toBe("brave")
    expect(res.body.results).toHaveLength(4)
    expect(res.body.results[0]).toEqual({
      title: "brave new world — result 1",
      url: "https://docs.example.com/brave-new-world/1",
      snippet: "brave new world & more: About brave new world: page 1.",
      published_at: PUBLISHED,
      score: null
    })
    expect(res.headers.get("x-gateway-response-cost")).toBe("0.0050000000")
  })

  it("Exa: POST /search with x-api-key, numResults, domains, a start date for the time range and page text asked", async () => {
    const before = Date.now()
    const res = await search({
      query: "neural search",
      provider: "exa1",
      max_results: 6,
      include_domains: ["example.org"],
      exclude_domains: ["blog.example.net"],
      time_range: "year"
    })
    expect(res.status, res.text).toBe(200)
    const sent = up.last("exa")!
    expect(sent.path).toBe("/search")
    expect(sent.headers["x-api-key"]).toBe(up.key)
    expect(sent.body).toEqual({
      query: "neural search",
      numResults: 6,
      includeDomains: ["example.org"],
      excludeDomains: ["blog.example.net"],
      startPublishedDate: expect.any(String),
      contents: { text: { maxCharacters: 1000 } }
    })
    const start = Date.parse(sent.body.startPublishedDate)
    expect(Math.abs(start - (before - 365 * 86_400_000))).toBeLessThan(60_000)
    // The fake ignores the domain filters: the gateway applies them to the result URLs.
    expect(res.body.results.map((r: any) => new URL(r.url).hostname)).toEqual(["news.example.org", "news.example.org"])
    expect(res.body.results[0]).toMatchObject({
      published_at: PUBLISHED,
      score: expect.any(Number),
      snippet: "About neural search: page 2."
    })
    expect(res.headers.get("x-gateway-response-cost")).toBe("0.0050000000")
  })

  it("SearXNG: GET {base}/search?q&format=json&time_range with no credential; max_results kept by the gateway; free", async () => {
    const res = await search({ query: "self hosted", provider: "searxng", max_results: 3, time_range: "day" })
    expect(res.status, res.text).toBe(200)
    const sent = up.last("searxng")!
    expect(sent.method).toBe("GET")
    expect(sent.path).toBe("/search")
    expect(sent.params).toEqual({ q: "self hosted", format: "json", time_range: "day" })
    expect(sent.headers.authorization).toBeUndefined()
    expect(res.body.provider).toBe("searxng")
    expect(res.body.results).toHaveLength(3)
    expect(res.body.results[0].published_at).toBe(PUBLISHED)
    expect(res.body.results[1].published_at).toBeNull()
    expect(res.headers.get("x-gateway-response-cost")).toBe("0.0000000000")
  })

  it("Serper: POST /search with X-API-KEY, {q, num, tbs}; relative dates are not dates; exclude_domains kept by the gateway", async () => {
    const res = await search({
      query: "google results",
      provider: "srp",
      max_results: 6,
      time_range: "day",
      exclude_domains: ["example.net"]
    })
    expect(res.status, res.text).toBe(200)
    const sent = up.last("serper")!
    expect(sent.path).toBe("/search")
    expect(sent.headers["x-api-key"]).toBe(up.key)
    expect(sent.body).toEqual({ q: "google results", num: 6, tbs: "qdr:d" })
    expect(res.body.provider).toBe("serper")
    expect(res.body.results).toHaveLength(4)
    expect(res.body.results.every((r: any) => !r.url.includes("example.net"))).toBe(true)
    expect(res.body.results[0]).toMatchObject({ title: "google results — result 1", published_at: null, score: null })
    expect(res.headers.get("x-gateway-response-cost")).toBe("0.0010000000")
  })

  it("with no provider named, the first enabled search connection in the default order answers", async () => {
    const res = await search({ query: "default order" })
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ provider: "tavily", connection: "tav" })
  })
})

describe("fallback", () => {
  it("tries the providers in order: the first answers 503, the second answers; one row with one fallback; no key anywhere", async () => {
    const before = down.calls().length
    const res = await search({ query: "fallback please", providers: ["tav-down", "serper"] })
    expect(res.status, res.text).toBe(200)
    expect(down.calls().length - before).toBe(1)
    expect(res.body).toMatchObject({ provider: "serper", connection: "srp", cached: false })
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(res.headers.get("x-gateway-provider")).toBe("serper")
    expectNoKey(res.text)
    expect(await usageRow(res.headers.get("x-gateway-request-id"))).toMatchObject({
      endpoint: "search",
      status: 200,
      provider: "serper",
      fallback_attempts: 1,
      cost_usd: 0.001
    })
  })

  it("when every provider fails the error names the failure, never the key it echoed", async () => {
    const res = await search({ query: "nobody answers", provider: "tav-down" })
    expect(res.status).toBeGreaterThanOrEqual(500)
    expect(res.body.error.message).toBeTruthy()
    expectNoKey(res.text)
  })
})

describe("cache and coalescing", () => {
  it("an identical request is answered from the cache: no upstream call, cached true, cost 0, X-Gateway-Cache-Hit true", async () => {
    const body = { query: "Cache   Me", provider: "srp", max_results: 2 }
    const first = await search(body)
    expect(first.status, first.text).toBe(200)
    expect(first.body.cached).toBe(false)
    const calls = up.calls("serper").length
    // Spacing and case are normalised away in the key.
    const second = await search({ ...body, query: "cache me" })
    expect(second.status, second.text).toBe(200)
    expect(up.calls("serper").length).toBe(calls)
    expect(second.body).toEqual({ ...first.body, query: "cache me", cached: true })
    expect(second.headers.get("x-gateway-cache-hit")).toBe("true")
    expect(second.headers.get("x-gateway-response-cost")).toBe("0.0000000000")
    expect(await usageRow(second.headers.get("x-gateway-request-id"))).toMatchObject({
      endpoint: "search",
      status: 200,
      provider: "serper",
      cost_usd: 0,
      cache_hit: 1
    })
    // Another max_results is another request.
    const other = await search({ ...body, max_results: 3 })
    expect(other.body.cached).toBe(false)
    expect(up.calls("serper").length).toBe(calls + 1)
  })

  it("the cache is per API key: another key's identical request goes upstream", async () => {
    const secret = "gwk_search_other_key_0123456789abcdef"
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "other" }, { secret })))
    const body = { query: "per key cache", provider: "srp" }
    expect((await search(body)).body.cached).toBe(false)
    const calls = up.calls("serper").length
    const mine = await search(body, { authorization: `Bearer ${secret}` })
    expect(mine.status, mine.text).toBe(200)
    expect(mine.body.cached).toBe(false)
    expect(up.calls("serper").length).toBe(calls + 1)
    expect((await search(body, { authorization: `Bearer ${secret}` })).body.cached).toBe(true)
  })

  it("10 concurrent identical requests make one upstream call; the other nine get the same answer, cached", async () => {
    up.delayMs = 300
    const calls = up.calls("exa").length
    const answers = await Promise.all(Array.from({ length: 10 }, () => search({ query: "all at once", provider: "exa1" })))
    expect(up.calls("exa").length - calls).toBe(1)
    for (const a of answers) expect(a.status, a.text).toBe(200)
    expect(answers.filter((a) => a.body.cached === false)).toHaveLength(1)
    expect(answers.filter((a) => a.body.cached === true)).toHaveLength(9)
    const ids = new Set(answers.map((a) => a.body.id))
    expect(ids.size).toBe(1)
    for (const a of answers) expect(a.body.results).toEqual(answers[0]!.body.results)
    const costs = answers.map((a) => a.headers.get("x-gateway-response-cost")).sort()
    expect(costs).toEqual([...Array(9).fill("0.0000000000"), "0.0050000000"])
  })
})

describe("GET /v1/search/analytics", () => {
  it("counts requests, hits, errors, latency percentiles and cache hits/misses per connection", async () => {
    // 1. stats-down fails, stats-ok answers (a miss). 2. the same again: a cache hit. 3. another query on stats-ok: a miss.
    const one = await search({ query: "stats one", providers: ["stats-down", "stats-ok"] })
    expect(one.status, one.text).toBe(200)
    expect((await search({ query: "stats one", providers: ["stats-down", "stats-ok"] })).body.cached).toBe(true)
    expect((await search({ query: "stats two", provider: "stats-ok" })).body.cached).toBe(false)
    const res = await call(`${gw.url}/v1/search/analytics`)
    expect(res.status, res.text).toBe(200)
    expect(res.body.scope).toBe("this process, since it started")
    expect(Date.parse(res.body.since)).toBeLessThanOrEqual(Date.now())
    const of = (name: string) => res.body.providers.find((p: any) => p.connection === name)
    expect(of("stats-ok")).toMatchObject({ provider: "serper", requests: 2, hits: 2, errors: 0, cache_hits: 1, cache_misses: 2 })
    expect(of("stats-ok").latency_ms.samples).toBe(2)
    expect(of("stats-ok").latency_ms.p50).toBeGreaterThanOrEqual(0)
    expect(of("stats-ok").latency_ms.p95).toBeGreaterThanOrEqual(of("stats-ok").latency_ms.p50)
    expect(of("stats-down")).toMatchObject({ provider: "brave", requests: 1, hits: 0, errors: 1, cache_hits: 0, cache_misses: 0 })
    expect(res.body.totals.requests).toBeGreaterThanOrEqual(3)
    expect(res.body.totals.cache_hits).toBeGreaterThanOrEqual(1)
  })
})

describe("bad input", () => {
  it.each([
    [{ provider: "tav" }, "query"],
    [{ query: "   " }, "query"],
    [{ query: "x", max_results: 0 }, "max_results"],
    [{ query: "x", max_results: 21 }, "max_results"],
    [{ query: "x", max_results: 2.5 }, "max_results"],
    [{ query: "x", search_depth: "deep" }, "search_depth"],
    [{ query: "x", time_range: "decade" }, "time_range"],
    [{ query: "x", include_domains: "example.com" }, "include_domains"],
    [{ query: "x", exclude_domains: ["ok.com", "not a domain"] }, "exclude_domains[1]"],
    [{ query: "x", provider: "google" }, "provider"],
    [{ query: "x", providers: [] }, "providers"],
    [{ query: "x", providers: ["tav", "nope"] }, "providers[1]"],
    [{ query: "x", provider: "tav", providers: ["srp"] }, "providers"]
  ])("%j is a 400 naming %s", async (body, param) => {
    const res = await search(body)
    expect(res.status, res.text).toBe(400)
    expect(res.body.error.param).toBe(param)
    expect(res.body.error.message).toContain(param.replace(/\[\d+\]$/, ""))
  })

  it("an unknown provider's 400 says which names are valid", async () => {
    const res = await search({ query: "x", provider: "google" })
    expect(res.body.error.message).toMatch(/unknown search provider 'google'.*tavily, brave, exa, searxng, serper/)
  })
})
