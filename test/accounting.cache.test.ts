import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as TestClock from "effect/TestClock"
import type { AccountingConfigShape } from "../src/services/accounting/AccountingConfig.js"
import { AccountingConfig } from "../src/services/accounting/AccountingConfig.js"
import { cacheable, cacheKey, cacheParams, canonicalJson, promptText } from "../src/services/accounting/cacheKey.js"
import type { CachePut } from "../src/services/accounting/ResponseCache.js"
import { cosine, ResponseCache } from "../src/services/accounting/ResponseCache.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import type { CanonicalRequest } from "../src/domain/canonical.js"
import type { Row } from "../src/platform/store/BatchWriter.js"
import { BatchWriter } from "../src/platform/store/BatchWriter.js"
import * as Db from "../src/platform/store/Db.js"
import { queryDb } from "./support/db.js"
import { tempDir } from "./support/gateway.js"

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)

const dbAt = (dataDir: string) => Db.layer.pipe(Layer.provide(AppConfig.layerTest({ dataDir })), Layer.provide(quiet))

/** The real batch writer on a real database (for `it.live`: the writer lingers on the clock). */
const liveCacheAt = (dataDir: string, overrides: Partial<AccountingConfigShape> = {}) =>
  ResponseCache.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(AccountingConfig.layerTest(overrides), BatchWriter.layer)),
    Layer.provideMerge(dbAt(dataDir)),
    Layer.provide(quiet)
  )

/** A real database, and a writer that only records what was appended (for `TestClock` tests). */
const recordingCache = (overrides: Partial<AccountingConfigShape> = {}) => {
  const appended: Array<{ table: string; row: Row }> = []
  const writer = Layer.succeed(BatchWriter, {
    append: (table, row) => void appended.push({ table, row }),
    flush: Effect.void,
    pending: Effect.succeed(0)
  })
  const layer = ResponseCache.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(AccountingConfig.layerTest(overrides), writer)),
    Layer.provideMerge(dbAt(tempDir())),
    Layer.provide(quiet)
  )
  return { appended, layer }
}

const req = (patch: Partial<CanonicalRequest> = {}): CanonicalRequest => ({
  model: "gpt-4o",
  system: [{ type: "text", text: "Be brief." }],
  messages: [{ role: "user", content: [{ type: "text", text: "What is 2+2?" }] }],
  tools: [],
  temperature: 0,
  stream: false,
  ...patch
})

const key = (r: CanonicalRequest, format = "openai-chat", model = r.model) => cacheKey({ format, model, req: r })

const entry = (k: string, patch: Partial<CachePut> = {}): CachePut => ({
  key: k,
  model: "gpt-4o",
  format: "openai-chat",
  body: JSON.stringify({ id: k, choices: [] }),
  usage: { inputTokens: 10, outputTokens: 2 },
  costUsd: 0.0012,
  provider: "openai",
  ...patch
})

const vec = (...xs: Array<number>) => Float32Array.from(xs)

describe("cacheable", () => {
  it.each([
    [{ temperature: 0 }, true],
    [{ temperature: 0, seed: 7 }, true],
    [{ temperature: 0.7, seed: 7 }, true],
    [{ temperature: 1.2, seed: 0 }, true],
    [{ temperature: undefined, seed: 3 }, true],
    [{ temperature: 0.7 }, false],
    [{ temperature: undefined }, false],
    [{ temperature: 0, stream: true }, false],
    [{ temperature: 0.2, seed: 1, stream: true }, false]
  ] as const)("%o → %s", (patch, expected) => {
    expect(cacheable(req(patch as Partial<CanonicalRequest>))).toBe(expected)
  })
})

describe("cacheKey", () => {
  const withTool = req({
    messages: [
      { role: "user", content: [{ type: "text", text: "Weather in Paris?" }] },
      { role: "assistant", content: [{ type: "tool_use", id: "call_1", name: "weather", input: { city: "Paris", unit: "c" } }] },
      { role: "tool", content: [{ type: "tool_result", toolUseId: "call_1", content: [{ type: "text", text: "18C" }] }] }
    ],
    tools: [
      {
        name: "weather",
        description: "Current weather",
        parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } } }
      }
    ],
    toolChoice: { type: "auto" },
    maxTokens: 100
  })

  it("is a SHA-256 hex string", () => {
    expect(key(req())).toMatch(/^[0-9a-f]{64}$/)
  })

  it("ignores JSON key order at every level", () => {
    const reordered: CanonicalRequest = {
      stream: false,
      maxTokens: 100,
      toolChoice: { type: "auto" },
      tools: [
        {
          parameters: { properties: { unit: { type: "string" }, city: { type: "string" } }, type: "object" },
          description: "Current weather",
          name: "weather"
        }
      ],
      temperature: 0,
      messages: [
        { content: [{ text: "Weather in Paris?", type: "text" }], role: "user" },
        { content: [{ input: { unit: "c", city: "Paris" }, name: "weather", id: "call_1", type: "tool_use" }], role: "assistant" },
        { content: [{ content: [{ text: "18C", type: "text" }], toolUseId: "call_1", type: "tool_result" }], role: "tool" }
      ],
      system: [{ text: "Be brief.", type: "text" }],
      model: "gpt-4o"
    }
    expect(key(reordered)).toBe(key(withTool))
  })

  it("ignores the stream flag, the end-user id and trailing whitespace of text", () => {
    const k = key(req())
    expect(key(req({ stream: true }))).toBe(k)
    expect(key(req({ user: "alice" }))).toBe(k)
    expect(key(req({ messages: [{ role: "user", content: [{ type: "text", text: "What is 2+2?  \n" }] }] }))).toBe(k)
  })

  it("changes with every answer-affecting field", () => {
    const k = key(withTool)
    const variants: Array<[string, string]> = [
      [
        "message",
        key({
          ...withTool,
          messages: [{ role: "user", content: [{ type: "text", text: "Weather in Rome?" }] }, ...withTool.messages.slice(1)]
        })
      ],
      [
        "tool input",
        key({
          ...withTool,
          messages: [
            withTool.messages[0]!,
            { role: "assistant", content: [{ type: "tool_use", id: "call_1", name: "weather", input: { city: "Rome", unit: "c" } }] },
            withTool.messages[2]!
          ]
        })
      ],
      ["temperature", key({ ...withTool, temperature: 0.5 })],
      ["max tokens", key({ ...withTool, maxTokens: 101 })],
      ["tool", key({ ...withTool, tools: [{ ...withTool.tools[0]!, description: "Weather now" }] })],
      ["tool choice", key({ ...withTool, toolChoice: { type: "required" } })],
      ["system", key({ ...withTool, system: [{ type: "text", text: "Be verbose." }] })],
      ["seed", key({ ...withTool, seed: 1 })],
      ["top p", key({ ...withTool, topP: 0.9 })],
      ["stop", key({ ...withTool, stop: ["\n"] })],
      ["response format", key({ ...withTool, responseFormat: { type: "json_object" } })],
      ["reasoning", key({ ...withTool, reasoning: { enabled: true, effort: "high" } })],
      ["model", key(withTool, "openai-chat", "gpt-4o-mini")],
      ["format", key(withTool, "anthropic")]
    ]
    for (const [field, other] of variants) expect(other, field).not.toBe(k)
    expect(new Set(variants.map(([, v]) => v)).size).toBe(variants.length)
  })

  it("params: equal for different messages, different for other parameters", () => {
    const p = (r: CanonicalRequest) => cacheParams({ format: "openai-chat", model: r.model, req: r })
    expect(p(req({ messages: [{ role: "user", content: [{ type: "text", text: "What's 2 + 2?" }] }] }))).toBe(p(req()))
    expect(p(req({ maxTokens: 10 }))).not.toBe(p(req()))
    expect(p(req({ temperature: 0.3, seed: 1 }))).not.toBe(p(req({ temperature: 0, seed: 1 })))
  })

  it("canonicalJson sorts keys and drops undefined members", () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { f: 2, e: undefined }], c: "x" } })).toBe('{"a":{"c":"x","d":[1,{"f":2}]},"b":1}')
  })

  it("promptText is role-prefixed, system first", () => {
    expect(promptText(req({ messages: [...req().messages, { role: "assistant", content: [{ type: "text", text: "4" }] }] }))).toBe(
      "system: Be brief.\nuser: What is 2+2?\nassistant: 4"
    )
  })
})

describe("cosine", () => {
  it("is 1 for the same direction, 0 orthogonal, -1 opposite, 0 for mismatched or zero vectors", () => {
    expect(cosine(vec(1, 2, 3), vec(2, 4, 6))).toBeCloseTo(1, 6)
    expect(cosine(vec(1, 0), vec(0, 1))).toBe(0)
    expect(cosine(vec(1, 1), vec(-1, -1))).toBeCloseTo(-1, 6)
    expect(cosine(vec(1, 0), vec(1, 0, 0))).toBe(0)
    expect(cosine(vec(0, 0), vec(1, 0))).toBe(0)
  })
})

describe("ResponseCache: memory tier", () => {
  it.effect("put then get from memory; the write goes to the batch writer", () => {
    const { appended, layer } = recordingCache()
    return Effect.gen(function* () {
      const cache = yield* ResponseCache
      const stored = yield* cache.put(entry("k1", { params: "p", embedding: vec(1, 0) }))
      expect(stored.createdAt).toBe(0)
      expect(stored.expiresAt).toBe(3_600_000)
      const hit = yield* cache.get("k1")
      expect(hit).toMatchObject({ key: "k1", body: stored.body, costUsd: 0.0012, match: "exact", similarity: 1 })
      expect(appended).toHaveLength(1)
      expect(appended[0]!.table).toBe("cache_entries")
      expect(appended[0]!.row).toMatchObject({
        key: "k1",
        model: "gpt-4o",
        format: "openai-chat",
        cost_usd: 0.0012,
        provider: "openai",
        created_at: 0,
        expires_at: 3_600_000
      })
      expect(JSON.parse(appended[0]!.row.usage as string)).toEqual({ inputTokens: 10, outputTokens: 2, _params: "p" })
      expect(yield* cache.get("nope")).toBeUndefined()
    }).pipe(Effect.provide(layer))
  })

  it.effect("evicts the least recently used entry beyond cacheMaxEntries", () =>
    Effect.gen(function* () {
      const cache = yield* ResponseCache
      yield* cache.put(entry("a"))
      yield* cache.put(entry("b"))
      expect(yield* cache.get("a")).toBeDefined()
      yield* cache.put(entry("c"))
      expect(yield* cache.get("b")).toBeUndefined()
      expect(yield* cache.get("a")).toBeDefined()
      expect(yield* cache.get("c")).toBeDefined()
      expect((yield* cache.stats).memorySize).toBe(2)
    }).pipe(Effect.provide(recordingCache({ cacheMaxEntries: 2 }).layer))
  )

  it.effect("expired entries are never returned and are dropped", () =>
    Effect.gen(function* () {
      const cache = yield* ResponseCache
      yield* cache.put(entry("k"))
      yield* TestClock.adjust("999 millis")
      expect(yield* cache.get("k")).toBeDefined()
      yield* TestClock.adjust("1 millis")
      expect(yield* cache.get("k")).toBeUndefined()
      expect((yield* cache.stats).memorySize).toBe(0)
    }).pipe(Effect.provide(recordingCache({ cacheTtlMs: 1000 }).layer))
  )

  it.effect("stats: sizes, hits, misses, hit rate", () =>
    Effect.gen(function* () {
      const cache = yield* ResponseCache
      expect(yield* cache.stats).toEqual({ memorySize: 0, memoryMaxSize: 5, dbSize: 0, hits: 0, misses: 0, hitRate: 0, similarHits: 0 })
      yield* cache.put(entry("a"))
      yield* cache.put(entry("b"))
      yield* cache.get("a")
      yield* cache.get("b")
      yield* cache.get("x")
      const s = yield* cache.stats
      expect(s).toMatchObject({ memorySize: 2, memoryMaxSize: 5, hits: 2, misses: 1, similarHits: 0 })
      expect(s.hitRate).toBeCloseTo(2 / 3, 10)
    }).pipe(Effect.provide(recordingCache({ cacheMaxEntries: 5 }).layer))
  )
})

describe("ResponseCache: similarity", () => {
  const query = (embedding: Float32Array, params = "p1") => ({ format: "openai-chat", model: "gpt-4o", params, embedding })

  it.effect("a near-identical embedding at or above the threshold hits; below misses", () =>
    Effect.gen(function* () {
      const cache = yield* ResponseCache
      yield* cache.put(entry("k1", { params: "p1", embedding: vec(1, 0, 0, 0) }))
      const near = vec(0.99, 0.05, 0, 0)
      expect(cosine(near, vec(1, 0, 0, 0))).toBeGreaterThan(0.95)
      const hit = yield* cache.get("other-key", query(near))
      expect(hit).toMatchObject({ key: "k1", match: "similar" })
      expect(hit!.similarity).toBeGreaterThan(0.95)
      expect(yield* cache.get("other-key", query(vec(0.7, 0.7, 0, 0)))).toBeUndefined()
      const s = yield* cache.stats
      expect(s).toMatchObject({ hits: 1, misses: 1, similarHits: 1 })
    }).pipe(Effect.provide(recordingCache({ cacheSimilarity: 0.95 }).layer))
  )

  it.effect("returns the most similar entry; different params, format or model never match", () =>
    Effect.gen(function* () {
      const cache = yield* ResponseCache
      yield* cache.put(entry("far", { params: "p1", embedding: vec(1, 0.2, 0) }))
      yield* cache.put(entry("close", { params: "p1", embedding: vec(1, 0.01, 0) }))
      yield* cache.put(entry("other-params", { params: "p2", embedding: vec(1, 0, 0) }))
      expect((yield* cache.get("q", query(vec(1, 0, 0))))?.key).toBe("close")
      expect(yield* cache.get("q", query(vec(1, 0, 0), "p3"))).toBeUndefined()
      expect(yield* cache.get("q", { ...query(vec(1, 0, 0)), format: "anthropic" })).toBeUndefined()
      expect(yield* cache.get("q", { ...query(vec(1, 0, 0)), model: "gpt-4o-mini" })).toBeUndefined()
      expect(yield* cache.get("q", query(vec(1, 0)))).toBeUndefined()
      expect(yield* cache.get("q", query(vec(0, 0, 1), "p2"))).toBeUndefined()
      expect((yield* cache.get("q", query(vec(1, 0, 0), "p2")))?.key).toBe("other-params")
    }).pipe(Effect.provide(recordingCache({ cacheSimilarity: 0.9 }).layer))
  )

  it.effect("expired entries take no part in similarity", () =>
    Effect.gen(function* () {
      const cache = yield* ResponseCache
      yield* cache.put(entry("k1", { params: "p1", embedding: vec(1, 0) }))
      yield* TestClock.adjust("2 seconds")
      expect(yield* cache.get("q", query(vec(1, 0)))).toBeUndefined()
    }).pipe(Effect.provide(recordingCache({ cacheTtlMs: 1000 }).layer))
  )
})

describe("ResponseCache: database tier", () => {
  it.live("an entry put by one layer is read by a fresh layer on the same file, then promoted to memory", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* Effect.gen(function* () {
        const cache = yield* ResponseCache
        yield* cache.put(entry("k1", { params: "p1", embedding: vec(0.25, -1.5, 3) }))
        yield* cache.put(entry("k2", { usage: null, provider: null }))
        yield* Effect.flatMap(BatchWriter, (w) => w.flush)
      }).pipe(Effect.provide(liveCacheAt(dir)))
      expect(queryDb(dir, "SELECT key FROM cache_entries ORDER BY key").map((r) => r.key)).toEqual(["k1", "k2"])

      yield* Effect.gen(function* () {
        const cache = yield* ResponseCache
        expect(yield* cache.stats).toMatchObject({ memorySize: 0, dbSize: 2 })
        const hit = yield* cache.get("k1")
        expect(hit).toMatchObject({
          key: "k1",
          model: "gpt-4o",
          format: "openai-chat",
          usage: { inputTokens: 10, outputTokens: 2 },
          costUsd: 0.0012,
          provider: "openai",
          params: "p1",
          match: "exact"
        })
        expect(Array.from(hit!.embedding!)).toEqual([0.25, -1.5, 3])
        expect(yield* cache.get("k2")).toMatchObject({ usage: null, provider: null })
        expect(yield* cache.stats).toMatchObject({ memorySize: 2, dbSize: 2, hits: 2 })
        // Promoted with params and embedding: it now takes part in similarity.
        const similar = yield* cache.get("q", { format: "openai-chat", model: "gpt-4o", params: "p1", embedding: vec(0.25, -1.5, 3) })
        expect(similar).toMatchObject({ key: "k1", match: "similar" })
      }).pipe(Effect.provide(liveCacheAt(dir)))
    })
  )

  it.live("a row past its expiry is ignored", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* Effect.gen(function* () {
        const cache = yield* ResponseCache
        yield* cache.put(entry("old", { createdAt: 1000, expiresAt: 2000 }))
        yield* Effect.flatMap(BatchWriter, (w) => w.flush)
      }).pipe(Effect.provide(liveCacheAt(dir)))
      expect(queryDb(dir, "SELECT count(*) AS n FROM cache_entries")[0]!.n).toBe(1)
      yield* Effect.gen(function* () {
        const cache = yield* ResponseCache
        expect(yield* cache.get("old")).toBeUndefined()
        expect((yield* cache.stats).dbSize).toBe(0)
      }).pipe(Effect.provide(liveCacheAt(dir)))
    })
  )

  it.effect("the background sweep deletes expired rows every minute", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const row = (key: string, expiresAt: number) =>
        sql`INSERT INTO cache_entries ${sql.insert({ key, model: "m", format: "openai-chat", body: "{}", cost_usd: 0, created_at: 0, expires_at: expiresAt })}`
      yield* row("soon", 30_000)
      yield* row("later", 90_000)
      yield* row("much-later", 10_000_000)
      const count = Effect.map(sql<{ n: number }>`SELECT count(*) AS n FROM cache_entries`, (r) => r[0]!.n)
      expect(yield* count).toBe(3)
      yield* TestClock.adjust("1 minute")
      expect(yield* count).toBe(2)
      yield* TestClock.adjust("1 minute")
      expect(yield* count).toBe(1)
      const cache = yield* ResponseCache
      expect(yield* cache.sweep).toBe(0)
    }).pipe(Effect.provide(recordingCache().layer))
  )

  it.live("clear empties both tiers and answers how much each held", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* Effect.gen(function* () {
        const cache = yield* ResponseCache
        yield* cache.put(entry("a"))
        yield* cache.put(entry("b"))
        yield* cache.put(entry("c"))
        // Not flushed: clear waits for queued writes so they cannot come back after it.
        expect(yield* cache.clear).toEqual({ memory: 3, db: 3 })
        expect(yield* cache.get("a")).toBeUndefined()
        expect(yield* cache.stats).toMatchObject({ memorySize: 0, dbSize: 0 })
      }).pipe(Effect.provide(liveCacheAt(dir)))
      expect(queryDb(dir, "SELECT count(*) AS n FROM cache_entries")[0]!.n).toBe(0)
    })
  )

  it.live("dbSize counts unexpired rows once written", () =>
    Effect.gen(function* () {
      const cache = yield* ResponseCache
      yield* cache.put(entry("a"))
      yield* cache.put(entry("b"))
      yield* cache.put(entry("gone", { createdAt: 0, expiresAt: 1 }))
      yield* Effect.flatMap(BatchWriter, (w) => w.flush)
      expect(yield* cache.stats).toMatchObject({ memorySize: 2, memoryMaxSize: 1000, dbSize: 2 })
    }).pipe(Effect.provide(liveCacheAt(tempDir())))
  )
})
