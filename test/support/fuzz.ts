import fc from "fast-check"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import WebSocket from "ws"

/**
 * The fuzz harness (test/fuzz.test.ts): request generators derived from the recorded client
 * traffic in test/fixtures/clients, senders with a deadline, and the oracle that turns an
 * outcome into findings. A finding is a defect whatever the input: a 5xx other than 501 (the
 * fake upstream stays healthy), a connection cut without an answer, a process that died, an
 * answer that never came, or a foreign browser origin let through without a key.
 */

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/clients")

export const CLIENT_KEY = "gwk_fuzz_client_key_0123456789abcdef"
export const ADMIN_KEY = "gwk_fuzz_admin_key_0123456789abcdefg"

// ─── Cases ────────────────────────────────────────────────────────────────────────────────────────

/** What the request presented as a key: a valid one, none/invalid, or unclear (duplicates). */
type KeyPresented = "valid" | "none" | "unclear"

export interface HttpCase {
  readonly kind: "http"
  /** The route template the case came from (`inference POST /v1/chat/completions`). */
  readonly route: string
  readonly plane: "inference" | "management" | "other"
  readonly method: string
  /** Path and query as sent (latin1: each char one byte on the wire). */
  readonly target: string
  readonly headers: Record<string, string | Array<string>>
  readonly body?: Buffer
  /** The body goes in chunks (`Transfer-Encoding: chunked`, no length): its size is known only as it arrives. */
  readonly chunked?: boolean
  /**
   * The body goes with neither a length nor chunks, as node's client sends a DELETE (or GET) body
   * written in pieces: as far as HTTP goes the request has none, and its bytes come after it.
   */
  readonly unframed?: boolean
  /** Sent on a keep-alive connection (else `Connection: close`, node's client without an agent). */
  readonly keepAlive?: boolean
  readonly key: KeyPresented
  readonly origin?: string
  /** What was done to the recorded request. */
  readonly tags: ReadonlyArray<string>
}

export interface WsCase {
  readonly kind: "ws"
  readonly route: string
  readonly target: string
  readonly headers: Record<string, string>
  readonly frames: ReadonlyArray<{ readonly data: string | Buffer; readonly binary: boolean; readonly tag: string }>
  readonly key: KeyPresented
  readonly origin?: string
  readonly tags: ReadonlyArray<string>
}

export type FuzzCase = HttpCase | WsCase

interface Template {
  readonly plane: "inference" | "management" | "other"
  readonly method: string
  /** With `{name}` where a path parameter goes. */
  readonly path: string
  readonly params?: Record<string, string>
  readonly query?: string
  readonly headers?: Record<string, string>
  readonly body?: unknown
}

const AUTH_HEADERS = new Set(["authorization", "x-api-key", "x-goog-api-key", "api-key"])
const DROP_HEADERS = new Set([
  "host",
  "connection",
  "content-length",
  "accept-encoding",
  "transfer-encoding",
  "upgrade",
  "sec-websocket-key",
  "sec-websocket-version",
  "sec-websocket-extensions"
])

interface Recording {
  readonly method: string
  readonly path: string
  readonly query?: Record<string, string>
  readonly headers: Record<string, string>
  readonly body: unknown
}

/** Templates from every recorded request and frame, plus the routes no recording covers. */
export const loadCorpus = (upstream: string): { http: Array<Template>; frames: Array<Record<string, unknown>> } => {
  const recordings: Array<Recording> = []
  for (const file of fs
    .readdirSync(path.join(FIXTURES, "cli"))
    .filter((f) => f.endsWith(".jsonl"))
    .sort()) {
    for (const line of fs.readFileSync(path.join(FIXTURES, "cli", file), "utf8").split("\n"))
      if (line.trim()) recordings.push(JSON.parse(line))
  }
  for (const file of fs.readdirSync(path.join(FIXTURES, "sdk")).sort()) {
    if (file.endsWith(".jsonl")) {
      for (const line of fs.readFileSync(path.join(FIXTURES, "sdk", file), "utf8").split("\n"))
        if (line.trim()) recordings.push(JSON.parse(line))
    } else if (file.endsWith(".json") && !file.startsWith("_")) {
      recordings.push(...((JSON.parse(fs.readFileSync(path.join(FIXTURES, "sdk", file), "utf8")).requests ?? []) as Array<Recording>))
    }
  }
  const frames: Array<Record<string, unknown>> = []
  const http: Array<Template> = []
  const seen = new Set<string>()
  for (const r of recordings) {
    if (r.method === "WS") {
      if (r.body && typeof r.body === "object") frames.push(r.body as Record<string, unknown>)
      continue
    }
    if (!["GET", "POST", "HEAD"].includes(r.method) || r.headers["upgrade"]) continue
    const headers: Record<string, string> = {}
    for (const [k, v] of Object.entries(r.headers))
      if (!DROP_HEADERS.has(k.toLowerCase()) && !AUTH_HEADERS.has(k.toLowerCase())) headers[k.toLowerCase()] = String(v)
    const query = new URLSearchParams(r.query ?? {})
    query.delete("key")
    // Recordings repeat themselves (count_tokens fifty times): keep each distinct shape once.
    const id = `${r.method} ${r.path} ${JSON.stringify(r.body).length}`
    if (seen.has(id)) continue
    seen.add(id)
    const gem = /^(\/v1(?:beta)?\/models\/)([^/:]+)(:[A-Za-z]+)$/.exec(r.path)
    http.push({
      plane: "inference",
      method: r.method,
      path: gem ? `${gem[1]}{model}${gem[3]}` : r.path,
      ...(gem ? { params: { model: gem[2]! } } : {}),
      query: query.toString(),
      headers,
      body: r.body ?? undefined
    })
  }
  const pick = (p: string) => http.find((t) => t.path === p && t.method === "POST")?.body
  const chat = pick("/v1/chat/completions") ?? { model: "m1", messages: [{ role: "user", content: "hi" }] }
  const embed = pick("/v1/embeddings") ?? { model: "text-embedding-3-small", input: "hi" }
  const ollamaChat = pick("/api/chat") ?? { model: "llama3", messages: [{ role: "user", content: "hi" }] }
  const responses = pick("/v1/responses") ?? { model: "gpt-5", input: "hi" }
  const json = { "content-type": "application/json" }
  const inference = (method: string, p: string, body?: unknown, params?: Record<string, string>, query?: string): Template => ({
    plane: "inference",
    method,
    path: p,
    ...(params ? { params } : {}),
    ...(query ? { query } : {}),
    ...(body === undefined ? {} : { headers: json, body })
  })
  http.push(
    inference("POST", "/v1/completions", { model: "m1", prompt: "say hi", max_tokens: 16 }),
    inference("POST", "/responses", responses),
    inference("POST", "/api/v1/responses", responses),
    inference("POST", "/v1/api/chat", ollamaChat),
    inference("POST", "/api/embeddings", { model: "nomic-embed-text", prompt: "hi" }),
    inference("POST", "/api/show", { model: "llama3" }),
    inference("GET", "/api/version"),
    inference("GET", "/api/ps"),
    inference("GET", "/v1beta/models"),
    inference("GET", "/v1beta/models/{model}", undefined, { model: "gemini-2.5-flash" }),
    inference("GET", "/v1/models/{model}", undefined, { model: "gpt-5" }),
    inference("POST", "/v1beta/models/{model}:embedContent", { content: { parts: [{ text: "hi" }] } }, { model: "text-embedding-004" }),
    inference("POST", "/v1/providers/{provider}/chat/completions", chat, { provider: "to-chat" }),
    inference("POST", "/v1/providers/{provider}/embeddings", embed, { provider: "to-chat" }),
    inference("POST", "/v1/providers/{provider}/images/generations", { prompt: "a cat" }, { provider: "openai" }),
    inference("GET", "/api/v1/provider-plugin-manifest"),
    inference("GET", "/v1/ws", undefined, undefined, "handshake=1"),
    inference("GET", "/api/hello"),
    inference("HEAD", "/api/hello"),
    inference("POST", "/v1/images/generations", { prompt: "a cat" }),
    inference("POST", "/v1/rerank", { query: "q", documents: ["a"] }),
    inference("GET", "/api/v1/editor/{token}/", undefined, { token: CLIENT_KEY }),
    inference("GET", "/api/v1/editor/{token}/models", undefined, { token: CLIENT_KEY }),
    inference("POST", "/api/v1/editor/{token}/chat/completions", chat, { token: CLIENT_KEY }),
    inference("POST", "/api/v1/editor/{token}/responses", responses, { token: CLIENT_KEY }),
    inference("POST", "/api/v1/editor/{token}/api/chat", ollamaChat, { token: CLIENT_KEY }),
    inference("GET", "/api/v1/editor/{token}/api/tags", undefined, { token: CLIENT_KEY }),
    inference("POST", "/a2a", {
      jsonrpc: "2.0",
      id: 1,
      method: "message/send",
      params: { skill: "list-capabilities", messages: [{ role: "user", content: "hi" }] }
    }),
    inference("GET", "/.well-known/agent-card.json")
  )
  const mgmt = (method: string, p: string, body?: unknown, params?: Record<string, string>, query?: string): Template => ({
    plane: "management",
    method,
    path: p,
    ...(params ? { params } : {}),
    ...(query ? { query } : {}),
    ...(body === undefined ? {} : { headers: json, body })
  })
  const connection = { provider: "openai-compatible", name: "fz", baseUrl: `${upstream}/v1`, apiKey: "sk-fz", models: ["m1"], priority: 9 }
  const id = { id: "conn_doesnotexist" }
  http.push(
    mgmt("GET", "/api/health/ping"),
    mgmt("GET", "/api/openapi.json"),
    mgmt("GET", "/api/agent-skills", undefined, undefined, "category=api&area=auth"),
    mgmt("GET", "/api/agent-skills/coverage"),
    mgmt("GET", "/api/agent-skills/{id}", undefined, { id: "gw-auth" }),
    mgmt("GET", "/api/agent-skills/{id}/raw", undefined, { id: "cli-keys" }),
    mgmt("POST", "/api/auth/login", { password: "a long admin password" }),
    mgmt("POST", "/api/auth/logout", {}),
    mgmt("GET", "/api/auth/session"),
    mgmt("GET", "/api/keys"),
    mgmt("POST", "/api/keys", { name: "fuzz", scopes: ["inference"], expiresAt: null }),
    mgmt("DELETE", "/api/keys/{id}", undefined, id),
    mgmt("GET", "/api/providers"),
    mgmt("POST", "/api/providers", connection),
    mgmt("POST", "/api/providers/validate", connection),
    mgmt("GET", "/api/providers/{id}", undefined, id),
    mgmt("PUT", "/api/providers/{id}", connection, id),
    mgmt("DELETE", "/api/providers/{id}", undefined, id),
    mgmt("POST", "/api/providers/{id}/test", {}, id),
    mgmt("GET", "/api/providers/{id}/models", undefined, id),
    mgmt("GET", "/api/settings/feature-flags"),
    mgmt("PUT", "/api/settings/feature-flags", { key: "MODEL_CATALOG_INCLUDE_NAMES", value: "true" }),
    mgmt("DELETE", "/api/settings/feature-flags"),
    mgmt("GET", "/api/combos"),
    mgmt("POST", "/api/combos", { id: "fz-combo", name: "fz combo", strategy: "priority", targets: [{ model: "to-chat/m1" }] }),
    mgmt("GET", "/api/combos/auto"),
    mgmt("GET", "/api/combos/{id}", undefined, id),
    mgmt("PUT", "/api/combos/{id}", { name: "renamed", strategy: "round-robin" }, id),
    mgmt("PATCH", "/api/combos/{id}", { name: "renamed" }, id),
    mgmt("DELETE", "/api/combos/{id}", undefined, id),
    mgmt("GET", "/api/resilience"),
    mgmt("PATCH", "/api/resilience", { providerBreaker: { apikey: { failureThreshold: 5 } } }),
    mgmt("POST", "/api/resilience/reset", { connections: true }),
    mgmt("GET", "/api/resilience/model-cooldowns"),
    mgmt("DELETE", "/api/resilience/model-cooldowns", { all: true }),
    mgmt("GET", "/api/rate-limits"),
    mgmt("GET", "/api/rate-limit"),
    mgmt("GET", "/api/usage/history", undefined, undefined, "period=7d"),
    mgmt("GET", "/api/usage/logs", undefined, undefined, "limit=5"),
    mgmt("GET", "/api/usage/request-logs", undefined, undefined, "limit=5&offset=0"),
    mgmt("GET", "/api/usage/{id}", undefined, id),
    mgmt("GET", "/api/telemetry/summary", undefined, undefined, "window=1h"),
    mgmt("GET", "/api/monitoring/health"),
    mgmt("GET", "/api/usage/budget", undefined, undefined, "apiKeyId=key_x"),
    mgmt("POST", "/api/usage/budget", { apiKeyId: "key_doesnotexist", dailyLimitUsd: 5, monthlyLimitUsd: 50 }),
    mgmt("DELETE", "/api/usage/budget/{id}", undefined, id),
    mgmt("GET", "/api/usage/token-limits"),
    mgmt("POST", "/api/usage/token-limits", { apiKeyId: "key_doesnotexist", scope: "global", maxTokens: 1000 }),
    mgmt("DELETE", "/api/usage/token-limits", { id: "tl_x" }),
    mgmt("GET", "/api/pricing"),
    mgmt("PUT", "/api/pricing", { provider: "fz", model: "fz-model", inputPerMillion: 1, outputPerMillion: 2 }),
    mgmt("DELETE", "/api/pricing", { provider: "fz", model: "fz-model" }),
    mgmt("GET", "/api/cache/stats"),
    mgmt("DELETE", "/api/cache/stats"),
    mgmt("GET", "/api/sessions"),
    { plane: "other", method: "GET", path: "/" },
    { plane: "other", method: "GET", path: "/{id}", params: { id: "favicon.ico" } }
  )
  return { http, frames }
}

// ─── Strings that break things ────────────────────────────────────────────────────────────────────

const MODEL_PREFIXES = ["", "openai-compatible/", "to-chat/", "to-resp/", "anthropic/", "gemini/", "ollama/", "to-gem/", "auto/", "qtSd/"]

/** Strings with what breaks headers, logs and parsers: CR/LF, NUL, > U+00FF, lone surrogates, escapes. */
const oddString: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "a\r\nb",
    "x\ny",
    "line\rbreak",
    "\r\nSet-Cookie: evil=1",
    "ā",
    "\u0100",
    "模型",
    "😀",
    "\u2028\u2029",
    "\u0000",
    "\ud800",
    "\udfff lone",
    "\u00ff\u00fe",
    "%ZZ",
    "%E0%A4%A",
    "../../etc/passwd",
    " ",
    "",
    "\t",
    "null",
    "-1",
    "1e309",
    "__proto__",
    "constructor",
    "<script>",
    "'\"`"
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.string({ unit: "binary", maxLength: 20 })
)

const oddModel: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom(...MODEL_PREFIXES),
    fc.constantFrom("m1", "gpt-5", "claude-sonnet-4-5", "gemini-2.5-flash", "llama3", "x"),
    oddString
  )
  .map(([prefix, base, odd]) => `${prefix}${base}${odd}`)

/** Fields whose values end up in headers, keys and logs. */
const SENSITIVE_FIELDS = [
  "model",
  "prompt_cache_key",
  "user",
  "metadata",
  "session_id",
  "previous_response_id",
  "safety_identifier",
  "service_tier",
  "instructions",
  "system",
  "reasoning_effort"
]

// ─── Body mutations ───────────────────────────────────────────────────────────────────────────────

type Json = null | boolean | number | string | Array<Json> | { [k: string]: Json }

/** A body being mutated: a JSON value, or (after a text-level mutation) bytes. */
type Body = { readonly json: Json } | { readonly bytes: Buffer }

const text = (b: Body): string => ("json" in b ? JSON.stringify(b.json) : b.bytes.toString("utf8"))
export const bytesOf = (b: Body): Buffer => ("json" in b ? Buffer.from(JSON.stringify(b.json), "utf8") : b.bytes)

const clone = (j: Json): Json => (j === null || typeof j !== "object" ? j : JSON.parse(JSON.stringify(j)))

/** Every (container, key) in a JSON value, parents first. */
const slots = (root: Json): Array<{ parent: Record<string, Json> | Array<Json>; key: string | number; depth: number }> => {
  const out: Array<{ parent: Record<string, Json> | Array<Json>; key: string | number; depth: number }> = []
  const walk = (v: Json, depth: number) => {
    if (out.length > 400 || v === null || typeof v !== "object") return
    if (Array.isArray(v)) v.forEach((c, i) => (out.push({ parent: v, key: i, depth }), walk(c, depth + 1)))
    else for (const k of Object.keys(v)) out.push({ parent: v, key: k, depth }), walk(v[k]!, depth + 1)
  }
  walk(root, 0)
  return out
}

const deep = (depth: number, kind: "array" | "object", leaf: string): string =>
  kind === "array" ? "[".repeat(depth) + leaf + "]".repeat(depth) : '{"a":'.repeat(depth) + leaf + "}".repeat(depth)

/** One mutation: given a chooser of random numbers, changes a body. Each names itself in the case's tags. */
interface Mutation {
  readonly tag: string
  readonly apply: (b: Body, r: Rand) => Body
}

/** Randomness handed to mutations (drawn by fast-check, so the run is reproducible from its seed). */
export interface Rand {
  int(max: number): number
  pick<A>(xs: ReadonlyArray<A>): A
  odd(): string
  model(): string
}

const onJson =
  (f: (j: Json, r: Rand) => Json) =>
  (b: Body, r: Rand): Body =>
    "json" in b ? { json: f(clone(b.json), r) } : b

const randomValue = (r: Rand): Json =>
  r.pick<() => Json>([
    () => null,
    () => r.int(2) === 0,
    () => r.int(1e9) - 5e8,
    () => 1e308 * 10 || 0,
    () => -0,
    () => r.odd(),
    () => [],
    () => ({}),
    () => [r.odd(), null],
    () => ({ x: r.odd() })
  ])()

const MUTATION_LIST: ReadonlyArray<Mutation> = [
  {
    tag: "drop-field",
    apply: onJson((j, r) => {
      const s = slots(j)
      if (s.length === 0) return j
      const { parent, key } = r.pick(s)
      if (Array.isArray(parent)) parent.splice(key as number, 1)
      else delete parent[key as string]
      return j
    })
  },
  {
    tag: "retype-field",
    apply: onJson((j, r) => {
      const s = slots(j)
      if (s.length === 0) return randomValue(r)
      const { parent, key } = r.pick(s)
      ;(parent as Record<string, Json>)[key as string] = randomValue(r)
      return j
    })
  },
  {
    tag: "odd-sensitive-field",
    apply: onJson((j, r) => {
      if (j === null || typeof j !== "object" || Array.isArray(j)) return j
      const field = r.pick(SENSITIVE_FIELDS)
      j[field] = field === "model" ? r.model() : field === "metadata" ? { [r.odd()]: r.odd(), user_id: r.odd() } : r.odd()
      return j
    })
  },
  {
    tag: "odd-model",
    apply: onJson((j, r) => {
      if (j !== null && typeof j === "object" && !Array.isArray(j)) j["model"] = r.model()
      return j
    })
  },
  {
    tag: "odd-string-anywhere",
    apply: onJson((j, r) => {
      const strings = slots(j).filter((s) => typeof (s.parent as Record<string, Json>)[s.key as string] === "string")
      if (strings.length === 0) return j
      const { parent, key } = r.pick(strings)
      ;(parent as Record<string, Json>)[key as string] = r.odd()
      return j
    })
  },
  {
    tag: "duplicate-field",
    apply: (b, r) => {
      const t = text(b)
      if (!t.startsWith("{") || t.length < 2) return b
      const field = r.pick(["model", "stream", "messages", "input", "contents", "prompt_cache_key", "max_tokens"])
      const dup = r.pick<string>([
        `"${field}":null,`,
        `"${field}":"${r.int(2) ? "x" : "openai-compatible/m1"}",`,
        `"${field}":[],`,
        `"${field}":true,`
      ])
      return { bytes: Buffer.from(`{${dup}${t.slice(1)}`, "utf8") }
    }
  },
  {
    tag: "duplicate-element",
    apply: onJson((j, r) => {
      const arrays = slots(j).filter((s) => Array.isArray((s.parent as Record<string, Json>)[s.key as string]))
      if (arrays.length === 0) return j
      const { parent, key } = r.pick(arrays)
      const arr = (parent as Record<string, Array<Json>>)[key as string]!
      if (arr.length > 0) for (let i = 0, n = 1 + r.int(50); i < n; i++) arr.push(clone(arr[0]!))
      return j
    })
  },
  {
    tag: "deep-nesting",
    apply: (b, r) => {
      const depth = r.pick([64, 1000, 5000, 20000])
      const nested = deep(depth, r.pick<"array" | "object">(["array", "object"]), "1")
      // In place of a value of the recorded body (a message's content, a tool's schema...), as a new field, or as the whole body.
      const where = r.int(4)
      if ("json" in b && b.json !== null && typeof b.json === "object" && where < 3) {
        const j = clone(b.json) as Record<string, Json>
        const s = slots(j)
        const marker = "\u0000deep\u0000"
        if (where < 2 && s.length > 0) {
          const { parent, key } = r.pick(s)
          ;(parent as Record<string, Json>)[key as string] = marker
        } else if (!Array.isArray(j)) j[r.pick(["metadata", "tools", "x", "response_format", "generationConfig", "options"])] = marker
        return { bytes: Buffer.from(JSON.stringify(j).replace(JSON.stringify(marker), nested), "utf8") }
      }
      return { bytes: Buffer.from(deep(depth, "array", text(b) || "1"), "utf8") }
    }
  },
  {
    tag: "huge-string",
    apply: onJson((j, r) => {
      const size = r.pick([64 * 1024, 512 * 1024, 2 * 1024 * 1024])
      const big = r.pick(["a", "é", "模", "\n", "\\"]).repeat(size / 2)
      if (j === null || typeof j !== "object" || Array.isArray(j)) return big
      j[r.pick(["model", "prompt_cache_key", "input", "prompt", "user", "instructions"])] = big
      return j
    })
  },
  {
    tag: "invalid-utf8",
    apply: (b, r) => {
      const buf = bytesOf(b)
      const bad = r.pick([
        [0xff],
        [0xfe, 0xff],
        [0xc3, 0x28],
        [0xed, 0xa0, 0x80],
        [0xf8, 0x88, 0x80, 0x80, 0x80],
        [0xe0, 0xa4],
        [0xc0, 0xaf],
        [0x80]
      ])
      // Inside a string value when there is one (after an opening quote), else anywhere.
      const quotes: Array<number> = []
      for (let i = 0; i < buf.length && quotes.length < 200; i++) if (buf[i] === 0x22) quotes.push(i + 1)
      const at = quotes.length ? r.pick(quotes) : r.int(buf.length + 1)
      return { bytes: Buffer.concat([buf.subarray(0, at), Buffer.from(bad), buf.subarray(at)]) }
    }
  },
  {
    tag: "truncate",
    apply: (b, r) => {
      const buf = bytesOf(b)
      return { bytes: buf.subarray(0, r.int(buf.length + 1)) }
    }
  },
  {
    tag: "not-json",
    apply: (_b, r) => ({
      bytes: Buffer.from(
        r.pick([
          "",
          "null",
          "[]",
          '"str"',
          "42",
          "{",
          "}",
          "model=m1&stream=true",
          '--x\r\nContent-Disposition: form-data; name="model"\r\n\r\nm1\r\n--x--\r\n',
          "\ufeff{}",
          r.odd()
        ]),
        "utf8"
      )
    })
  },
  {
    tag: "random-json",
    apply: (_b, r) => ({
      json: {
        model: r.model(),
        [r.odd()]: randomValue(r),
        messages: r.int(2) ? randomValue(r) : [{ role: r.odd(), content: randomValue(r) }]
      }
    })
  }
]

/** How often each is drawn (the ones that reach headers and recursion more often). */
const WEIGHTS: Record<string, number> = { "odd-sensitive-field": 4, "odd-model": 2, "deep-nesting": 3, "invalid-utf8": 2 }
const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  ...MUTATION_LIST.map((m) => ({ weight: WEIGHTS[m.tag] ?? 1, arbitrary: fc.constant(m) }))
)

// ─── Headers and paths ────────────────────────────────────────────────────────────────────────────

/** Non-ASCII as it travels in a header: UTF-8 bytes, each written as one latin1 char. */
const wire = (s: string): string => Buffer.from(s, "utf8").toString("latin1")
/** What an HTTP client can put in a header value at all (no CR, LF or NUL). */
const headerSafe = (s: string): string => wire(s).replace(/[\r\n\0]/g, "")

const LOOPBACK_ORIGINS = ["http://127.0.0.1:20128", "http://localhost:3000", "http://[::1]:8080", "http://127.0.0.2"]
const FOREIGN_ORIGINS = [
  "http://127.0.0.1.evil.example",
  "http://127.0.0.1.nip.io.evil.example",
  "http://localhost.evil.example",
  "https://evil.example",
  "http://evil.example#@127.0.0.1",
  "http://127.0.0.1@evil.example",
  "http://0x7f000001.evil.example"
]
const ODD_ORIGINS = ["null", "", "*", "%ZZ", "http://", "not a url"]

/**
 * Loopback by this test's own reading, independent of the gateway's code: the hostname of the
 * parsed URL is `localhost`, `[::1]` or a dotted IPv4 address in 127.0.0.0/8.
 */
export const foreignOrigin = (origin: string | undefined): boolean => {
  if (origin === undefined) return false
  let host: string
  try {
    host = new URL(origin).hostname
  } catch {
    return false // not a URL: whether it is refused is the gateway's choice
  }
  return !(host === "localhost" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host))
}

const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=latin1",
  "application/json; charset=utf-16",
  "APPLICATION/JSON",
  "application/json;;;",
  "multipart/form-data; boundary=x",
  "multipart/form-data",
  "text/plain",
  "text/plain; charset=utf-8",
  "application/x-www-form-urlencoded",
  "application/octet-stream",
  "",
  "garbage",
  "application/json, text/plain"
]
const ENCODINGS = ["gzip", "br", "deflate", "garbage", "gzip, br", "identity", "zstd"]

interface HeaderChoice {
  readonly headers: Record<string, string | Array<string>>
  readonly key: KeyPresented
  readonly query?: string
  readonly origin?: string
  readonly tags: ReadonlyArray<string>
}

type Auth = { headers: Record<string, string | Array<string>>; key: KeyPresented; query?: string; tag: string }

const authArb: fc.Arbitrary<Auth> = fc.oneof(
  fc.constant({ headers: {}, key: "none" as const, tag: "auth:none" }),
  fc.constant({ headers: { authorization: `Bearer ${CLIENT_KEY}` }, key: "valid" as const, tag: "auth:bearer" }),
  fc.constant({ headers: { authorization: `Bearer ${ADMIN_KEY}` }, key: "valid" as const, tag: "auth:admin" }),
  fc.constant({ headers: { "x-api-key": CLIENT_KEY }, key: "valid" as const, tag: "auth:x-api-key" }),
  fc.constant({ headers: { "x-goog-api-key": CLIENT_KEY }, key: "valid" as const, tag: "auth:x-goog-api-key" }),
  fc.constant({ headers: {}, key: "valid" as const, query: `api_key=${CLIENT_KEY}`, tag: "auth:query" }),
  fc.constant({ headers: {}, key: "none" as const, query: "api_key=%ZZ&key=%E0%A4%A", tag: "auth:query-malformed" }),
  fc.constant({ headers: { authorization: "Bearer " }, key: "none" as const, tag: "auth:empty-bearer" }),
  fc.constant({ headers: { authorization: "Basic dXNlcjpwYXNz" }, key: "none" as const, tag: "auth:basic" }),
  fc.constant({ headers: { authorization: `bearer ${CLIENT_KEY}` }, key: "unclear" as const, tag: "auth:lowercase" }),
  fc.constant({ headers: { authorization: `Bearer ${"k".repeat(8000)}` }, key: "none" as const, tag: "auth:long" }),
  fc.constant({
    headers: { authorization: [`Bearer ${CLIENT_KEY}`, "Bearer wrong"] as Array<string> },
    key: "unclear" as const,
    tag: "auth:duplicate"
  }),
  oddString.map((s) => ({ headers: { authorization: `Bearer ${headerSafe(s)}` }, key: "none" as const, tag: "auth:odd" })),
  oddString.map((s) => ({ headers: { "x-api-key": headerSafe(s) }, key: "none" as const, tag: "auth:odd-x-api-key" }))
)

const originArb: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 5, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constantFrom(...LOOPBACK_ORIGINS) },
  { weight: 2, arbitrary: fc.constantFrom(...FOREIGN_ORIGINS) },
  { weight: 1, arbitrary: fc.constantFrom(...ODD_ORIGINS) }
)

const adminAuth: fc.Arbitrary<Auth> = fc.constant({
  headers: { authorization: `Bearer ${ADMIN_KEY}` } as Record<string, string | Array<string>>,
  key: "valid" as KeyPresented,
  tag: "auth:admin"
})

const headerArb = (hasBody: boolean, plane: "inference" | "management" | "other" = "inference"): fc.Arbitrary<HeaderChoice> =>
  fc
    .record({
      // The management plane mostly with the admin key, so requests get past its authentication.
      auth: plane === "management" ? fc.oneof({ weight: 3, arbitrary: adminAuth }, { weight: 2, arbitrary: authArb }) : authArb,
      origin: originArb,
      contentType: hasBody
        ? fc.oneof(
            { weight: 4, arbitrary: fc.constant("application/json") },
            { weight: 4, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
            { weight: 1, arbitrary: fc.constantFrom("multipart/form-data; boundary=x", "text/plain") },
            { weight: 1, arbitrary: fc.constant(undefined) }
          )
        : fc.constant(undefined),
      encoding: fc.option(fc.constantFrom(...ENCODINGS), { freq: 6 }),
      session: fc.option(oddString, { freq: 4 }),
      idempotency: fc.option(fc.oneof(oddString, fc.constant("same-key")), { freq: 5 }),
      requestId: fc.option(oddString, { freq: 8 }),
      accept: fc.option(fc.constantFrom("text/event-stream", "application/x-ndjson", "*/*", "garbage"), { freq: 5 }),
      progress: fc.option(fc.constantFrom("true", "1", "garbage"), { freq: 8 }),
      anthropic: fc.option(fc.constantFrom("2023-06-01", "garbage", "ā"), { freq: 6 }),
      userAgent: fc.option(fc.constantFrom("google-genai-sdk/1.0 gl-node/20", "GeminiCLI/0.61", "codex_exec/0.169.0", "ā\u0100"), {
        freq: 6
      })
    })
    .map((h) => {
      const headers: Record<string, string | Array<string>> = { ...h.auth.headers }
      const tags = [h.auth.tag]
      const set = (name: string, value: string | undefined, tag: string) => {
        if (value === undefined) return
        headers[name] = headerSafe(value)
        tags.push(tag)
      }
      set("content-type", h.contentType, `content-type:${h.contentType}`)
      set("content-encoding", h.encoding ?? undefined, `content-encoding:${h.encoding}`)
      set("origin", h.origin, `origin:${h.origin}`)
      set("x-session-id", h.session ?? undefined, "x-session-id")
      set("idempotency-key", h.idempotency ?? undefined, "idempotency-key")
      set("x-request-id", h.requestId ?? undefined, "x-request-id")
      set("accept", h.accept ?? undefined, `accept:${h.accept}`)
      set("x-gateway-progress", h.progress ?? undefined, "x-gateway-progress")
      set("anthropic-version", h.anthropic ?? undefined, "anthropic-version")
      set("user-agent", h.userAgent ?? undefined, "user-agent")
      return {
        headers,
        key: h.auth.key,
        ...(h.auth.query ? { query: h.auth.query } : {}),
        ...(h.origin !== undefined ? { origin: h.origin } : {}),
        tags
      }
    })

/** What goes where a path parameter is: the recorded value, or a malformed percent-escape and friends. */
const paramArb = (recorded: string): fc.Arbitrary<{ value: string; tag?: string }> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.constant({ value: encodeURIComponent(recorded) }) },
    {
      weight: 2,
      arbitrary: fc
        .constantFrom(
          "%ZZ",
          "%E0%A4%A",
          "%",
          "%%",
          "%00",
          "%2F",
          "%C0%AF",
          "%FF%FE",
          "..",
          "%2e%2e",
          "a%0D%0Ab",
          "%E2%80%A8",
          "%F0%9F%98%80",
          "%25ZZ"
        )
        .map((p) => ({ value: p, tag: `param:${p}` }))
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom(recorded), fc.constantFrom("%ZZ", "%", "%E0%A4%A"))
        .map(([r, p]) => ({ value: encodeURIComponent(r) + p, tag: `param:+${p}` }))
    },
    { weight: 1, arbitrary: oddString.map((s) => ({ value: wire(s).replace(/[\s?#/\0-\x1f\x7f]/g, "_"), tag: "param:odd-raw" })) }
  )

const METHODS = [
  "GET",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "HEAD",
  "OPTIONS",
  "PROPFIND",
  "PURGE",
  "QUERY",
  "SEARCH",
  "LINK",
  "M-SEARCH",
  "TRACE"
]

const randArb: fc.Arbitrary<Rand> = fc.array(fc.nat(), { minLength: 64, maxLength: 64 }).chain((ints) =>
  fc
    .tuple(fc.array(oddString, { minLength: 8, maxLength: 8 }), fc.array(oddModel, { minLength: 4, maxLength: 4 }))
    .map(([odds, models]) => {
      let i = 0
      const next = () => ints[i++ % ints.length]! + i
      return {
        int: (max: number) => (max <= 0 ? 0 : next() % max),
        pick: <A>(xs: ReadonlyArray<A>) => xs[next() % xs.length]!,
        odd: () => odds[next() % odds.length]!,
        model: () => models[next() % models.length]!
      }
    })
)

/** An HTTP case: a template, maybe an odd method, mutated body, random headers, maybe malformed path parameters. */
export const httpCaseArb = (templates: ReadonlyArray<Template>): fc.Arbitrary<HttpCase> =>
  fc.constantFrom(...templates).chain((t) =>
    fc
      .record({
        method: fc.oneof({ weight: 12, arbitrary: fc.constant(t.method) }, { weight: 1, arbitrary: fc.constantFrom(...METHODS) }),
        params: fc.record(Object.fromEntries(Object.entries(t.params ?? {}).map(([k, v]) => [k, paramArb(v)]))),
        mutations: fc.array(mutationArb, { maxLength: 3 }),
        rand: randArb,
        headers: headerArb(t.body !== undefined, t.plane),
        query: fc.option(fc.constantFrom("%ZZ", "alt=sse&alt=json", "a=%E0%A4%A", "beta=true", "key=%", "handshake=1&handshake=0"), {
          freq: 6
        }),
        // Sent chunked: a body over a limit is found only as it arrives (a reset there was a finding).
        chunked: fc.oneof({ weight: 7, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
        // Padding that takes a body past the planes' limits (1 MiB management, 32 MiB inference JSON).
        padding: fc.oneof(
          { weight: 12, arbitrary: fc.constant(0) },
          { weight: 3, arbitrary: fc.constant(2 * 1024 * 1024) },
          { weight: 1, arbitrary: fc.constant(40 * 1024 * 1024) }
        )
      })
      .map(({ method, params, mutations, rand, headers, query, chunked, padding }): HttpCase => {
        const tags = [...headers.tags]
        let target = t.path
        for (const [k, v] of Object.entries(params as Record<string, { value: string; tag?: string }>)) {
          target = target.replace(`{${k}}`, v.value)
          if (v.tag) tags.push(v.tag)
        }
        const q = [t.query, headers.query, query ?? undefined].filter((x) => x).join("&")
        if (query) tags.push(`query:${query}`)
        if (method !== t.method) tags.push(`method:${method}`)
        let body: Body | undefined = t.body === undefined ? undefined : { json: clone(t.body as Json) }
        // A few GETs get a body anyway.
        if (body === undefined && mutations.length > 0) body = { json: {} }
        for (const m of mutations) {
          if (body) body = m.apply(body, rand)
          tags.push(m.tag)
        }
        // The editor routes carry the key in the path: the recorded token is the valid client key.
        const token = (params as Record<string, { value: string; tag?: string }>)["token"]
        const key: KeyPresented =
          token === undefined ? headers.key : token.tag === undefined ? "valid" : headers.key === "none" ? "none" : "unclear"
        const all: Record<string, string | Array<string>> = { ...(t.headers ?? {}), ...headers.headers }
        // The recorded content-type goes unless this case chose its own (or none).
        if (t.body !== undefined && headers.headers["content-type"] === undefined) delete all["content-type"]
        let bytes = body ? bytesOf(body) : undefined
        if (bytes && chunked) tags.push("transfer:chunked")
        // Whitespace after the JSON: the same document, larger than a limit (chunked or with its length).
        if (bytes && padding > 0) {
          bytes = padded(bytes, bytes.length + padding)
          tags.push(`padded:${padding >> 20}MiB`)
        }
        return {
          kind: "http",
          route: `${t.plane} ${t.method} ${t.path}`,
          plane: t.plane,
          method,
          target: q ? `${target}?${q}` : target,
          headers: all,
          ...(bytes ? { body: bytes } : {}),
          ...(bytes && chunked ? { chunked: true } : {}),
          key,
          ...(headers.origin !== undefined ? { origin: headers.origin } : {}),
          tags
        }
      })
  )

/** Spaces that bodies are padded with, filled once and grown to the largest padding asked for. */
let spaces = Buffer.alloc(0)
/**
 * `bytes` followed by spaces, `size` bytes in all (just `bytes` when they are that long already): one
 * new buffer, written once. Filling a new buffer of spaces per case and concatenating it (one case
 * in 16 pads by 40 MiB, the sweep's bodies are 2-6 MiB) was a fifth of the fuzz run's CPU.
 */
const padded = (bytes: Buffer, size: number): Buffer => {
  const padding = size - bytes.length
  if (padding <= 0) return bytes
  if (spaces.length < padding) spaces = Buffer.alloc(padding, 0x20)
  const out = Buffer.allocUnsafe(size)
  bytes.copy(out, 0)
  spaces.copy(out, bytes.length, 0, padding)
  return out
}

/** The sizes of the sweep's bodies: past the management plane's 1 MiB limit, under the inference plane's 32 MiB. */
const SWEEP_SIZES = [2 * 1024 * 1024, 4 * 1024 * 1024, 6 * 1024 * 1024]

/**
 * Every method of every route with a multi-MB body, with and without a content type, framed by
 * its length, in chunks or not at all, on keep-alive and closing connections: whatever the route
 * answers (most before reading the body, if they read it at all), the client must read it, never
 * a reset. The body is the route's recorded one (or `{}`) padded with whitespace, so it is still
 * JSON. Made one at a time (thousands of multi-MB bodies would not fit in memory together).
 */
export function* bodySweep(templates: ReadonlyArray<Template>): Generator<HttpCase> {
  let n = 0
  for (const t of templates) {
    for (const method of METHODS) {
      const i = n++
      const size = SWEEP_SIZES[i % SWEEP_SIZES.length]!
      const typed = i % 2 === 0
      const framing = (["length", "chunked", "none"] as const)[Math.floor(i / 2) % 3]!
      const keepAlive = Math.floor(i / 6) % 2 === 1
      const who = Math.floor(i / 12) % 3
      let target = t.path
      for (const [k, v] of Object.entries(t.params ?? {})) target = target.replace(`{${k}}`, encodeURIComponent(v))
      if (t.query) target = `${target}?${t.query}`
      const auth: Auth =
        t.plane === "management"
          ? who === 2
            ? { headers: {}, key: "none", tag: "auth:none" }
            : { headers: { authorization: `Bearer ${ADMIN_KEY}` }, key: "valid", tag: "auth:admin" }
          : who === 2
            ? { headers: { authorization: "Bearer not-a-key" }, key: "none", tag: "auth:odd" }
            : { headers: { authorization: `Bearer ${CLIENT_KEY}` }, key: "valid", tag: "auth:bearer" }
      const headers: Record<string, string | Array<string>> = { ...(t.headers ?? {}), ...auth.headers }
      delete headers["content-type"]
      if (typed) headers["content-type"] = "application/json"
      const json = Buffer.from(JSON.stringify(t.body ?? {}), "utf8")
      const body = padded(json, size)
      yield {
        kind: "http",
        route: `${t.plane} ${t.method} ${t.path}`,
        plane: t.plane,
        method,
        target,
        headers,
        body,
        ...(framing === "chunked" ? { chunked: true } : framing === "none" ? { unframed: true } : {}),
        ...(keepAlive ? { keepAlive: true } : {}),
        key: auth.key,
        tags: [
          "sweep",
          auth.tag,
          ...(method !== t.method ? [`method:${method}`] : []),
          `big:${size >> 20}MiB`,
          typed ? "content-type:application/json" : "content-type:none",
          `transfer:${framing}`,
          keepAlive ? "connection:keep-alive" : "connection:close"
        ]
      }
    }
  }
}

/** A WebSocket case: the upgrade's headers, then one to four frames. */
export const wsCaseArb = (frames: ReadonlyArray<Record<string, unknown>>): fc.Arbitrary<WsCase> => {
  const recorded = frames.length ? frames : [{ type: "response.create", model: "gpt-5", input: "say hi", stream: true }]
  const frameArb = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.tuple(fc.constantFrom(...recorded), fc.array(mutationArb, { maxLength: 2 }), randArb).map(([f, ms, r]) => {
        let b: Body = { json: clone(f as Json) }
        for (const m of ms) b = m.apply(b, r)
        return { data: text(b), binary: false, tag: `frame:${ms.map((m) => m.tag).join("+") || "recorded"}` }
      })
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 200 }).map((s) => ({ data: s, binary: false, tag: "frame:garbage-text" })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((a) => ({ data: Buffer.from(a), binary: true, tag: "frame:binary" })) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(1, 3).map((mb) => ({
        data: JSON.stringify({ type: "response.create", model: "gpt-5", input: "a".repeat(mb * 1024 * 1024) }),
        binary: false,
        tag: `frame:huge-${mb}MB`
      }))
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(1000, 5000, 20000).map((d) => ({
        data: `{"type":"response.create","model":"gpt-5","input":${deep(d, "array", "1")}}`,
        binary: false,
        tag: `frame:deep-${d}`
      }))
    },
    {
      weight: 2,
      arbitrary: fc
        .record({
          model: fc.oneof(fc.constant("gpt-5"), oddModel),
          previous: fc.option(fc.oneof(oddString, fc.constant("resp_doesnotexist")), { freq: 2 }),
          generate: fc.option(fc.constantFrom<Json>(false, "false", 0, null, true), { freq: 2 }),
          input: fc.constantFrom<Json>(
            "hi",
            [],
            {},
            null,
            42,
            [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }],
            [{ type: "reasoning" }],
            [{ type: "function_call_output", call_id: null }]
          ),
          extra: fc.dictionary(
            fc.constantFrom("tools", "store", "stream", "prompt_cache_key", "metadata", "instructions", "reasoning", "text", "tool_choice"),
            fc.jsonValue({ maxDepth: 2 }).map((v) => v as Json),
            { maxKeys: 3 }
          )
        })
        .map((f) => ({
          data: JSON.stringify({
            type: "response.create",
            model: f.model,
            input: f.input,
            ...(f.previous !== null ? { previous_response_id: f.previous } : {}),
            ...(f.generate !== null ? { generate: f.generate } : {}),
            ...f.extra
          }),
          binary: false,
          tag: "frame:odd-create"
        }))
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        { data: JSON.stringify({ type: "response.cancel" }), binary: false, tag: "frame:cancel" },
        { data: JSON.stringify({ type: "something.else" }), binary: false, tag: "frame:other-type" }
      )
    }
  )
  return fc
    .record({
      path: fc.constantFrom("/v1/responses", "/v1/responses", "/responses", "/api/v1/responses"),
      headers: headerArb(false),
      frames: fc.array(frameArb, { minLength: 1, maxLength: 4 })
    })
    .map(({ path: p, headers, frames: fs_ }) => {
      const flat: Record<string, string> = {}
      for (const [k, v] of Object.entries(headers.headers)) flat[k] = Array.isArray(v) ? v[0]! : v
      return {
        kind: "ws",
        route: `ws ${p}`,
        target: headers.query ? `${p}?${headers.query}` : p,
        headers: flat,
        frames: fs_,
        key: headers.key === "unclear" ? "unclear" : headers.key,
        ...(headers.origin !== undefined ? { origin: headers.origin } : {}),
        tags: [...headers.tags, ...fs_.map((f) => f.tag)]
      }
    })
}

// ─── Sending ──────────────────────────────────────────────────────────────────────────────────────

export interface Outcome {
  /** The answer's status (the upgrade's, for WebSocket cases). */
  readonly status?: number
  /** The connection failed before a complete answer (reset, hang-up, cut stream). */
  readonly cut?: string
  readonly hang?: boolean
  /** The start of the answer (or of the WebSocket frames), for the report. */
  readonly excerpt: string
  /** WebSocket: error frames with a 5xx status. */
  readonly ws5xx?: ReadonlyArray<string>
  /** WebSocket: the upgrade succeeded. */
  readonly upgraded?: boolean
}

const HANG = "deadline"
/** What a connection failing under the client looks like (a reset, a write to a closed socket). */
const TRANSPORT = /ECONNRESET|EPIPE|ECONNABORTED|socket hang up/

/** Requests and sockets waiting for an answer (so a crash of an in-process gateway can end them). */
const inFlight = new Set<() => void>()

/** Ends every request still waiting: the gateway that should answer them threw. */
export const abortInFlight = (): void => {
  for (const end of [...inFlight]) end()
}

export const sendHttp = (base: string, c: HttpCase, deadlineMs: number): Promise<Outcome> =>
  new Promise((resolve) => {
    const url = new URL(base)
    const headers: Record<string, string | Array<string> | number> = { ...c.headers }
    if (c.body && !c.chunked && !c.unframed) headers["content-length"] = c.body.length
    // Node's client frames a body in chunks by itself only for methods that usually have one
    // (not GET, DELETE, HEAD, OPTIONS): said explicitly, every method's body is framed (but an
    // unframed case's, which is the point of it).
    if (c.body && c.chunked) headers["transfer-encoding"] = "chunked"
    let req: http.ClientRequest
    // One connection of its own either way: kept alive (the answer must leave it usable) or closed after the answer.
    const agent = c.keepAlive ? new http.Agent({ keepAlive: true, maxSockets: 1 }) : false
    try {
      req = http.request({ host: url.hostname, port: url.port, method: c.method, path: c.target, headers, agent })
      // Neither a length nor chunks, whatever the method: the body's bytes go as they are.
      if (c.unframed) req.useChunkedEncodingByDefault = false
    } catch (e) {
      // The client itself refused what the generator made (not the gateway's doing).
      return resolve({ status: -1, excerpt: `client refused: ${(e as Error).message}` })
    }
    let settled = false
    const end = () => req.destroy(new Error("the gateway threw while answering"))
    const timer = setTimeout(() => req.destroy(new Error(HANG)), deadlineMs)
    inFlight.add(end)
    const done = (o: Outcome) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      inFlight.delete(end)
      resolve(o)
      // A keep-alive agent's socket would otherwise stay open until the gateway's idle timeout.
      if (agent) setImmediate(() => agent.destroy())
    }
    // On a connection that closes after the answer, an answer read whole while the body was still
    // being sent is done once the body is (or the connection closed): a reset then (EPIPE,
    // ECONNRESET) is a finding too, every body here being within what the gateway reads and drops.
    // (Node's client sends no more of a body once a keep-alive answer is whole: those end there.)
    let answered: Outcome | undefined
    const sentOrGone = () => {
      if (answered !== undefined && (req.writableFinished || req.destroyed)) done(answered)
    }
    req.on("finish", sentOrGone)
    req.on("close", sentOrGone)
    req.on("error", (e) => {
      const code = `${(e as NodeJS.ErrnoException).code ?? ""} ${e.message}`.trim()
      if (answered !== undefined) {
        if (e.message === HANG) return done({ ...answered, hang: true })
        // A transport failure; not node's client refusing what came after its answer (the
        // gateway's 400 for an unframed body's bytes, read as a request of their own).
        if (!TRANSPORT.test(code)) return done(answered)
        return done({ ...answered, cut: `reset after the answer, with the body still being sent: ${code}` })
      }
      done(e.message === HANG ? { hang: true, excerpt: "" } : { cut: code, excerpt: "" })
    })
    req.on("response", (res) => {
      const chunks: Array<Buffer> = []
      let size = 0
      const excerpt = () => Buffer.concat(chunks).toString("utf8").slice(0, 600)
      res.on("data", (d: Buffer) => {
        if (size < 4096) chunks.push(d)
        size += d.length
      })
      res.on("error", (e) =>
        done(
          e.message === HANG
            ? { status: res.statusCode!, hang: true, excerpt: excerpt() }
            : { status: res.statusCode!, cut: `answer cut: ${e.message}`, excerpt: excerpt() }
        )
      )
      res.on("end", () => {
        answered = { status: res.statusCode!, excerpt: excerpt() }
        if (c.keepAlive) return done(answered)
        // Looked at once the error events of this turn (a reset read with the answer) have run.
        setImmediate(sentOrGone)
      })
      res.on("close", () => {
        if (!res.complete) done({ status: res.statusCode!, cut: "answer cut before its end", excerpt: excerpt() })
      })
    })
    if ((c.chunked || c.unframed) && c.body) {
      // In pieces, so node sends no length (chunks, or nothing at all): 64 KiB each, waiting for drain.
      const body = c.body
      let at = 0
      const pump = () => {
        while (at < body.length && !req.destroyed) {
          const piece = body.subarray(at, at + 64 * 1024)
          at += piece.length
          if (!req.write(piece)) return void req.once("drain", pump)
        }
        if (!req.destroyed) req.end()
      }
      pump()
    } else req.end(c.body)
  })

const TERMINAL = new Set(["error", "response.completed", "response.failed", "response.incomplete"])

export const sendWs = (base: string, c: WsCase, deadlineMs: number): Promise<Outcome> =>
  new Promise((resolve) => {
    let settled = false
    const got: Array<string> = []
    const ws5xx: Array<string> = []
    let upgraded = false
    let ws: WebSocket
    const done = (o: Omit<Outcome, "excerpt" | "ws5xx" | "upgraded">) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      inFlight.delete(end)
      ws.removeAllListeners()
      ws.on("error", () => {})
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.terminate()
      resolve({ ...o, excerpt: got.join("\n").slice(0, 600), ws5xx, upgraded })
    }
    const timer = setTimeout(() => done({ hang: true }), deadlineMs)
    const end = () => done({ cut: "the gateway threw while answering" })
    inFlight.add(end)
    try {
      ws = new WebSocket(base.replace(/^http/, "ws") + c.target, { headers: c.headers, maxPayload: 256 * 1024 * 1024 })
    } catch (e) {
      clearTimeout(timer)
      inFlight.delete(end)
      return resolve({ status: -1, excerpt: `client refused: ${(e as Error).message}` })
    }
    const expected = c.frames.some((f) => f.tag === "frame:cancel") ? undefined : c.frames.length
    let terminals = 0
    let quiet: NodeJS.Timeout | undefined
    ws.on("unexpected-response", (_req, res) => {
      res.resume()
      done({ status: res.statusCode! })
    })
    ws.on("error", (e) => done({ cut: `${(e as NodeJS.ErrnoException).code ?? ""} ${e.message}`.trim() }))
    ws.on("open", () => {
      upgraded = true
      for (const f of c.frames) ws.send(f.data, { binary: f.binary })
      // With a cancel among the frames, not every frame answers: done when the socket is quiet.
      if (expected === undefined) quiet = setTimeout(() => done({ status: 101 }), 400)
    })
    ws.on("message", (data) => {
      const s = String(data)
      if (got.length < 20) got.push(s.slice(0, 300))
      let frame: any
      try {
        frame = JSON.parse(s)
      } catch {
        return
      }
      if (frame?.type === "error" && typeof frame.status === "number" && frame.status >= 500) ws5xx.push(s.slice(0, 300))
      if (TERMINAL.has(frame?.type)) terminals++
      if (quiet) quiet.refresh()
      if (expected !== undefined && terminals >= expected) done({ status: 101 })
    })
    ws.on("close", (code, reason) => {
      if (settled) return
      if (expected !== undefined && terminals >= expected) return done({ status: 101 })
      // Closed by the gateway before every frame was answered (1009: a frame over its limit is fine).
      if (code === 1009) return done({ status: 101 })
      done({ status: 101, cut: `socket closed ${code} ${String(reason)} after ${terminals} of ${expected ?? "?"} answers` })
    })
  })

// ─── Findings ─────────────────────────────────────────────────────────────────────────────────────

export type FindingKind = "500" | "5xx" | "crash" | "reset" | "hang" | "origin-bypass"

export interface Finding {
  readonly kind: FindingKind
  readonly signature: string
  readonly detail: string
  readonly case: FuzzCase
  readonly index: number
}

/** What an outcome says is wrong (nothing, usually). `crashed`: the gateway process died (or threw uncaught) meanwhile. */
export const judge = (
  c: FuzzCase,
  o: Outcome,
  crashed: string | undefined,
  cause = ""
): Array<Omit<Finding, "index" | "signature"> & { key: string }> => {
  const out: Array<Omit<Finding, "index" | "signature"> & { key: string }> = []
  const add = (kind: FindingKind, key: string, detail: string) =>
    out.push({ kind, key, detail: cause && kind !== "crash" && kind !== "origin-bypass" ? `${detail}\n${cause}` : detail, case: c })
  if (crashed) add("crash", crashed.split("\n")[0]!.slice(0, 120), crashed.slice(0, 1500))
  if (o.hang) add("hang", "no answer before the deadline", o.excerpt)
  if (o.cut && !crashed) add("reset", o.cut.replace(/\d+/g, "N"), `${o.cut}\n${o.excerpt}`)
  if (o.status !== undefined && o.status >= 500 && o.status !== 501)
    add(o.status === 500 ? "500" : "5xx", `status ${o.status} ${errorCode(o.excerpt)}`, o.excerpt)
  for (const f of o.ws5xx ?? []) add(/"status":500\b/.test(f) ? "500" : "5xx", `ws error frame ${errorCode(f)}`, f)
  // A browser page from a foreign origin, without a valid key, must not be served on the inference plane.
  const served = c.kind === "ws" ? o.upgraded === true : o.status !== undefined && o.status >= 200 && o.status < 300
  // Public by design: the liveness probe and the A2A agent card (a discovery document other agents fetch).
  const publicRoute =
    c.kind === "http" && (c.route.endsWith("/api/hello") || c.route.endsWith("/.well-known/agent-card.json") || c.plane !== "inference")
  if (served && !publicRoute && c.key === "none" && foreignOrigin(c.origin))
    add("origin-bypass", `origin ${c.origin}`, `${o.status} ${o.excerpt.slice(0, 200)}`)
  return out
}

const errorCode = (excerpt: string): string => {
  const m = /"(?:code|type)"\s*:\s*"([^"]{1,60})"/.exec(excerpt)
  return m ? m[1]! : ""
}

/** Collects findings by signature, keeping the smallest reproduction of each. */
export class Findings {
  readonly all = new Map<string, { first: Finding; smallest: Finding; count: number }>()
  counts = { cases: 0, fivehundred: 0, crashes: 0, resets: 0, hangs: 0, other: 0, unconfirmed: 0 }
  /** Timing findings that did not show again when their case was replayed (see `confirm`). */
  readonly unconfirmed: Array<string> = []

  record(index: number, c: FuzzCase, found: ReturnType<typeof judge>): void {
    this.counts.cases++
    for (const f of found) {
      if (f.kind === "500" || f.kind === "5xx") this.counts.fivehundred++
      else if (f.kind === "crash") this.counts.crashes++
      else if (f.kind === "reset") this.counts.resets++
      else if (f.kind === "hang") this.counts.hangs++
      else this.counts.other++
      const signature = `${f.kind} · ${c.route} · ${f.key}`
      const finding: Finding = { kind: f.kind, signature, detail: f.detail, case: c, index }
      const seen = this.all.get(signature)
      if (!seen) this.all.set(signature, { first: finding, smallest: finding, count: 1 })
      else {
        seen.count++
        if (size(c) < size(seen.smallest.case)) seen.smallest = finding
      }
    }
  }

  /**
   * Replays each finding that timing alone can cause (a 502/503/504, a hang, a WebSocket session
   * cut) up to `tries` times: one that does not show again is moved out of the findings into
   * `unconfirmed`, reported but not failing the run. A 500, a crash, an origin bypass and an HTTP
   * request whose connection failed before its answer was read (a reset, a hang-up) always
   * count: a client must read every answer, however rarely the race is lost.
   */
  async confirm(attempt: (c: FuzzCase) => Promise<ReturnType<typeof judge>>, tries = 2): Promise<void> {
    for (const [signature, entry] of [...this.all]) {
      const f = entry.first
      if (f.kind !== "5xx" && f.kind !== "hang" && !(f.kind === "reset" && f.case.kind === "ws")) continue
      let seen = false
      for (let i = 0; i < tries && !seen; i++)
        seen = (await attempt(f.case)).some((g) => `${g.kind} · ${f.case.route} · ${g.key}` === signature)
      if (seen) continue
      this.all.delete(signature)
      if (f.kind === "5xx") this.counts.fivehundred -= entry.count
      else if (f.kind === "hang") this.counts.hangs -= entry.count
      else this.counts.resets -= entry.count
      this.counts.unconfirmed += entry.count
      this.unconfirmed.push(
        `did not show again in ${tries} replays: ${signature} (×${entry.count}; case ${f.index}): ${f.detail.split("\n").slice(0, 3).join(" | ").slice(0, 600)}`
      )
    }
  }

  /** Replaces each HTTP finding's reproduction with a smaller one (not for hangs: each try would wait the deadline). */
  async shrink(attempt: (c: HttpCase) => Promise<ReturnType<typeof judge>>, skip: ReadonlyArray<FindingKind> = []): Promise<void> {
    for (const entry of this.all.values()) {
      const f = entry.smallest
      if (f.case.kind !== "http" || f.kind === "hang" || skip.includes(f.kind)) continue
      entry.smallest = { ...f, case: await minimize(f.case, f, attempt) }
    }
  }

  get empty(): boolean {
    return this.all.size === 0
  }

  summary(): string {
    const { cases, fivehundred, crashes, resets, hangs, other } = this.counts
    const { unconfirmed } = this.counts
    return `fuzz: ${cases} cases, ${fivehundred} answers of 500, ${crashes} crashes, ${resets} resets, ${hangs} hangs${other ? `, ${other} other findings` : ""}${unconfirmed ? `, ${unconfirmed} timing findings that did not reproduce` : ""}`
  }

  /** The report: each distinct finding once, with a curl line (bodies written to files under `dir`). */
  report(seed: number, base: string, dir: string, prefix = "finding"): string {
    fs.mkdirSync(dir, { recursive: true })
    const lines = [`${this.all.size} distinct findings (seed ${seed}; replay with FUZZ_SEED=${seed}); bodies in ${dir}`]
    let n = 0
    for (const { smallest, count } of [...this.all.values()].sort((a, b) => a.first.signature.localeCompare(b.first.signature))) {
      n++
      lines.push("", `#${n} ${smallest.signature} (×${count}; case ${smallest.index}; ${smallest.case.tags.join(", ")})`)
      lines.push(`   ${reproduce(smallest.case, base, dir, `${prefix}-${n}`)}`)
      lines.push(
        ...smallest.detail
          .split("\n")
          .slice(0, 10)
          .map((l) => `   | ${l.slice(0, 400)}`)
      )
    }
    return lines.join("\n")
  }
}

const size = (c: FuzzCase): number =>
  c.kind === "http"
    ? (c.body?.length ?? 0) + JSON.stringify(c.headers).length + c.target.length
    : c.frames.reduce((n, f) => n + f.data.length, 0) + JSON.stringify(c.headers).length

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`
/** A header value as the shell gives it to curl (latin1 chars back to their bytes). */
const shellBytes = (s: string): string =>
  /^[\x20-\x7e]*$/.test(s)
    ? shellQuote(s)
    : `"$(printf '${[...Buffer.from(s, "latin1")].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("")}')"`

export const reproduce = (c: FuzzCase, base: string, dir: string, name: string): string => {
  if (c.kind === "ws") {
    const file = path.join(dir, `${name}.frames.json`)
    fs.writeFileSync(
      file,
      JSON.stringify(c.frames.map((f) => (f.binary ? { binary: Buffer.from(f.data).toString("base64") } : { text: String(f.data) })))
    )
    return `websocket ${base.replace(/^http/, "ws")}${c.target} headers ${JSON.stringify(c.headers)}; frames (in order) in ${file}`
  }
  const parts = ["curl -sS -i", "--path-as-is", `-X ${c.method === "HEAD" ? "HEAD -I" : c.method}`]
  for (const [k, v] of Object.entries(c.headers))
    for (const one of Array.isArray(v) ? v : [v])
      parts.push(/^[\x20-\x7e]*$/.test(one) ? `-H ${shellQuote(`${k}: ${one}`)}` : `-H "${k}: ${shellBytes(one).slice(1, -1)}"`)
  // curl would send a form content-type of its own with a body.
  if (c.body && !Object.keys(c.headers).some((k) => k.toLowerCase() === "content-type")) parts.push("-H 'content-type:'")
  if (c.chunked) parts.push("-H 'transfer-encoding: chunked'")
  if (c.unframed) parts.push("-H 'content-length:'")
  if (!c.keepAlive) parts.push("-H 'connection: close'")
  if (c.body) {
    const printable = c.body.length <= 400 && /^[\x20-\x7e]*$/.test(c.body.toString("latin1"))
    if (printable) parts.push(`--data-binary ${shellQuote(c.body.toString("latin1"))}`)
    else {
      const file = path.join(dir, `${name}.body`)
      fs.writeFileSync(file, c.body)
      parts.push(`--data-binary @${file}`)
    }
  }
  parts.push(shellBytes(`${base}${c.target}`))
  return parts.join(" ")
}

export const findingsDir = (seed: number): string => path.join(os.tmpdir(), `gateway-fuzz-${seed}`)

/**
 * A smaller request with the same finding: drops headers, then the query, one at a time,
 * keeping each removal after which the finding (same kind and key) still shows.
 */
export const minimize = async (c: HttpCase, f: Finding, attempt: (c: HttpCase) => Promise<ReturnType<typeof judge>>): Promise<HttpCase> => {
  const same = (found: ReturnType<typeof judge>) =>
    found.some((g) => g.kind === f.kind && `${g.kind} · ${c.route} · ${g.key}` === f.signature)
  let best = c
  for (const name of Object.keys(c.headers)) {
    const { [name]: _drop, ...rest } = best.headers
    // Without its Origin header the case has no origin (the oracle reads it from the case).
    const smaller: HttpCase = name === "origin" ? { ...best, headers: rest, origin: undefined } : { ...best, headers: rest }
    if (same(await attempt(smaller))) best = smaller
  }
  const q = best.target.indexOf("?")
  if (q !== -1) {
    const smaller = { ...best, target: best.target.slice(0, q) }
    if (same(await attempt(smaller))) best = smaller
  }
  return best
}
