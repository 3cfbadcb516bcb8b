import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { sanitizeText } from "../src/services/guardrails/sanitize.js"
import { segmentsOf, mapSegments } from "../src/services/context/walk.js"
import type { FormatId } from "../src/domain/canonical.js"
import { decodeGenerateRequest } from "../src/upstream/formats/ollama.js"
import { FORMATS } from "../src/upstream/formats/registry.js"
import { agentResponder, SEEN } from "./agents/responder.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Compression over the recorded coding-agent and SDK traffic (test/fixtures/clients, the repo's
 * copy of ../shared/fixtures): every recorded inference request, replayed through the gateway to
 * an upstream of its own family (the pass-through path, so the upstream body is the client's body
 * after compression), with `x-gateway-compression: default` and each engine alone. Each must be
 * answered 200 in the client's format; the upstream gets a body its family's decoder accepts (the
 * strict fake upstream also checks); the response header names the mode; the same request twice
 * gives the same upstream bytes (prompt caches); only texts change (tools, ids, structure kept);
 * and a long noisy tool output put into a recording's tool results reaches the upstream shorter.
 */
const __dirname = path.dirname(fileURLToPath(import.meta.url))
const CLIENTS = path.resolve(__dirname, "fixtures/clients")
const ADMIN = "gwk_compfix_admin_key_0123456789abcdef"
const KEY = "gwk_compfix_client_key_0123456789abcd"

type Json = Record<string, any>

interface Recorded {
  readonly name: string
  readonly family: Family
  readonly endpoint: string
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: Json
}

/** The connection serving each family (pass-through: the client's family). */
const CONN: Record<Family, string> = {
  "openai-chat": "up-openai-chat",
  "openai-responses": "up-openai-responses",
  anthropic: "up-anthropic",
  gemini: "up-gemini",
  ollama: "up-ollama"
}
const CONNECTIONS: ReadonlyArray<[Family, Record<string, unknown>]> = [
  ["openai-chat", { provider: "openai-compatible", name: CONN["openai-chat"] }],
  ["openai-responses", { provider: "openai-compatible", name: CONN["openai-responses"], upstreamFormat: "openai-responses" }],
  ["anthropic", { provider: "anthropic", name: CONN.anthropic, apiKey: "sk-ant-upstream" }],
  ["gemini", { provider: "gemini", name: CONN.gemini, apiKey: "gemini-upstream-key" }],
  ["ollama", { provider: "ollama", name: CONN.ollama }]
]

/** The inference requests of a recording, addressed to the connection of their own family (count_tokens, embeddings and the rest left out).
 * */
const classify = (
  name: string,
  r: { method?: string; path?: string; headers?: Record<string, string>; body?: unknown }
): Recorded | undefined => {
  const body = r.body as Json | null | undefined
  if (body === null || typeof body !== "object" || Array.isArray(body)) return undefined
  const headers = r.headers ?? {}
  const p = r.path ?? ""
  const at = (family: Family, endpoint: string, urlPath = p, b: Json = body): Recorded => ({
    name,
    family,
    endpoint,
    method: "POST",
    path: urlPath,
    headers,
    body: { ...b, model: `${CONN[family]}/${b["model"]}` }
  })
  // Codex's WebSocket turns, as the same body over HTTP (the socket carries response.create).
  if (r.method === "WS" && body["type"] === "response.create") {
    const { type: _t, generate: _g, ...rest } = body
    return at("openai-responses", "responses", "/v1/responses", rest)
  }
  if (r.method !== "POST") return undefined
  if (p === "/v1/chat/completions") return at("openai-chat", "chat.completions")
  if (p === "/v1/responses") return at("openai-responses", "responses")
  if (p === "/v1/messages") {
    // Claude Code asked for thinking, but the recording's stand-in model answered its tool call without a
    // thinking block: the real API (and the strict fake upstream, same family here) rejects that history
    // with thinking on. Not compression's business: that recording goes without `thinking`.
    const unthought = (body["messages"] ?? []).some(
      (m: Json) =>
        m.role === "assistant" &&
        Array.isArray(m.content) &&
        m.content.some((c: Json) => c.type === "tool_use") &&
        m.content[0]?.type !== "thinking"
    )
    if (body["thinking"] && unthought) {
      const { thinking: _t, ...rest } = body
      return at("anthropic", "messages", p, rest)
    }
    return at("anthropic", "messages")
  }
  if (p === "/api/chat") return at("ollama", "api.chat")
  if (p === "/api/generate") return at("ollama", "api.generate")
  const g = /^\/(v1beta|v1)\/models\/([^:/]+):(generateContent|streamGenerateContent)$/.exec(p)
  if (g)
    return {
      name,
      family: "gemini",
      endpoint: g[3]!,
      method: "POST",
      path: `/${g[1]}/models/${CONN.gemini}/${g[2]}:${g[3]}`,
      headers,
      body
    }
  return undefined
}

const loadRecorded = (): Array<Recorded> => {
  const out: Array<Recorded> = []
  const cli = path.join(CLIENTS, "cli")
  for (const file of fs
    .readdirSync(cli)
    // Codex's compaction requests answer a sealed summary, not the model's text: test/responses-compaction.test.ts replays them.
    .filter((f) => f.endsWith(".requests.jsonl") && !f.includes("compact"))
    .sort()) {
    fs.readFileSync(path.join(cli, file), "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .forEach((line, i) => {
        const r = classify(`cli/${file.replace(/\.requests\.jsonl$/, "")}#${i + 1}`, JSON.parse(line))
        if (r) out.push(r)
      })
  }
  const sdk = path.join(CLIENTS, "sdk")
  for (const file of fs
    .readdirSync(sdk)
    .filter((f) => f.endsWith(".json") && !f.startsWith("_"))
    .sort()) {
    const doc = JSON.parse(fs.readFileSync(path.join(sdk, file), "utf8")) as { requests?: Array<Record<string, any>> }
    ;(doc.requests ?? []).forEach((req, i) => {
      const r = classify(`sdk/${file.replace(/\.json$/, "")}#${i + 1}`, req)
      if (r) out.push(r)
    })
  }
  return out
}

const AUTH_HEADERS = new Set(["authorization", "x-api-key", "x-goog-api-key", "api-key"])
const HOP_HEADERS = new Set([
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

let gw: TestGateway
let up: FakeUpstream

/** The recorded request (its own headers, the gateway's key) with `mode` in x-gateway-compression; what the client and the upstream got. */
const send = async (r: Recorded, mode: string, body: Json = r.body) => {
  const headers: Record<string, string> = { "content-type": "application/json" }
  for (const [name, value] of Object.entries(r.headers)) {
    const lower = name.toLowerCase()
    if (HOP_HEADERS.has(lower) || AUTH_HEADERS.has(lower) || lower.startsWith("x-gateway-")) continue
    headers[lower] = String(value)
  }
  headers["authorization"] = `Bearer ${KEY}`
  headers["x-gateway-compression"] = mode
  // The recorded chain's earlier responses were answered by another fake upstream: this one takes them as its own.
  if (typeof body["previous_response_id"] === "string") up.stored.add(body["previous_response_id"])
  const before = up.requests.length
  const violations = up.violations.length
  const res = await fetch(`${gw.url}${r.path}`, { method: "POST", headers, body: JSON.stringify(body) })
  const text = await res.text()
  expect(res.status, `${r.name} ${mode}: ${text.slice(0, 600)}`).toBe(200)
  expect(up.violations.slice(violations), `${r.name} ${mode}`).toEqual([])
  const sent = up.requests.slice(before)
  expect(sent, `${r.name} ${mode}`).toHaveLength(1)
  expect(sent[0]!.family).toBe(r.family)
  // The answer is the fake model's, in the client's own format, and a stream ends without an error.
  expect(text).not.toMatch(/"type":\s*"(error|response\.failed)"|event: error/)
  const answer = agentResponder(sent[0]!)
  if (answer.toolCalls) for (const c of answer.toolCalls) expect(text).toContain(`"${c.name}"`)
  else expect(text).toContain(answer.content!.slice(0, SEEN.length + 1))
  return { header: res.headers.get("x-gateway-compression"), upstream: sent[0]!.body as Json, text }
}

/** The upstream body as its family's decoder takes it (Gemini's model is in the path). */
const decodeUpstream = (r: Recorded, body: Json) => {
  if (r.family === "ollama" && r.endpoint === "api.generate") return decodeGenerateRequest(body)
  return FORMATS[r.family as FormatId].decodeRequest(r.family === "gemini" ? { ...body, model: "m" } : body)
}

const ID_KEYS = new Set([
  "id",
  "call_id",
  "tool_call_id",
  "tool_use_id",
  "name",
  "type",
  "role",
  "model",
  "arguments",
  "signature",
  "encrypted_content",
  "thoughtSignature"
])

/**
 * `after` is `before` with only texts changed: same keys in the same order, same array lengths,
 * every non-string equal, ids and names equal, and a changed string is one of `before`'s segment texts.
 */
const expectOnlyTexts = (before: unknown, after: unknown, texts: ReadonlySet<string>, at: string, changed: { n: number }): void => {
  if (typeof before === "string" && typeof after === "string") {
    if (before === after) return
    const key = at.slice(at.lastIndexOf(".") + 1)
    expect(ID_KEYS.has(key), `${at} is an id or name`).toBe(false)
    expect(texts.has(before), `${at} changed but is not a text segment: ${before.slice(0, 200)}`).toBe(true)
    changed.n++
    return
  }
  if (before === null || typeof before !== "object") return expect(after, at).toStrictEqual(before)
  expect(typeof after, at).toBe("object")
  expect(Array.isArray(after), at).toBe(Array.isArray(before))
  expect(Object.keys(after as object), at).toStrictEqual(Object.keys(before))
  for (const [k, v] of Object.entries(before)) expectOnlyTexts(v, (after as Json)[k], texts, `${at}.${k}`, changed)
}

/** Where a family keeps its tool definitions. */
const toolsOf = (body: Json) => ({
  tools: body["tools"],
  functions: body["functions"],
  tool_choice: body["tool_choice"],
  toolConfig: body["toolConfig"]
})

const MODES = ["default", "engine:rtk", "engine:json", "engine:whitespace", "engine:caveman"] as const

/** A long noisy command output: ANSI colours, a progress bar, trailing spaces, blank runs, many repeated lines. */
const NOISY = [
  "\u001b[1m> build\u001b[0m   ",
  ...Array.from({ length: 20 }, (_, i) => `\r[${"#".repeat(i)}${".".repeat(20 - i)}] ${i * 5}%`),
  "",
  "",
  "",
  "",
  ...Array.from({ length: 300 }, () => "\u001b[33mwarning\u001b[0m: unused variable `x` in src/lib.rs   "),
  ...Array.from({ length: 400 }, (_, i) => `\u001b[32m✓\u001b[0m test/case${i}.test.ts > passes ${i}   `),
  "",
  "",
  "",
  "Tests: 400 passed, 0 failed"
].join("\n")
/** A pretty-printed JSON tool output (json minifies it). */
const PRETTY = JSON.stringify(
  { files: Array.from({ length: 60 }, (_, i) => ({ name: `src/file${i}.ts`, size: i * 37, tags: ["a", "b"] })), total: 60 },
  null,
  2
)

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.script((r) => ({ chunks: 1, ...agentResponder(r) }))
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  // Non-streamed requests are always collected from a stream here (`nonStreamed: "stream"`): the
  // upstream bodies this file compares between modes keep one shape, whatever the connection's pace.
  for (const [family, body] of CONNECTIONS) {
    const res = await call(`${gw.url}/api/providers`, {
      body: { ...body, baseUrl: up.baseUrl(family), defaultModel: "m1", timeouts: { nonStreamed: "stream" } },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(res.status, res.text).toBe(201)
  }
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

const all = loadRecorded()
const segmentEndpoint = (r: Recorded) => r.endpoint

describe("the recorded client traffic, compressed", () => {
  it("found every agent's inference requests", () => {
    expect(new Set(all.map((r) => r.family))).toEqual(new Set(["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"]))
    const agents = fs.readdirSync(path.join(CLIENTS, "cli")).filter((f) => f.endsWith(".requests.jsonl") && !f.includes("compact"))
    for (const file of agents.filter((f) => !f.includes("count_tokens")))
      expect(
        all.some((r) => r.name.startsWith(`cli/${file.replace(/\.requests\.jsonl$/, "")}#`)),
        file
      ).toBe(true)
    expect(all.length).toBeGreaterThan(60)
  })

  for (const r of all) {
    it(`${r.name}: every mode answers, decodes, is deterministic and changes only texts`, async () => {
      const format = r.family as FormatId
      const off = await send(r, "off")
      expect(off.header).toBe("off; source=request-header")
      const texts = new Set(segmentsOf(format, segmentEndpoint(r), off.upstream).map((s) => s.text))
      for (const mode of MODES) {
        const a = await send(r, mode)
        expect(a.header, mode).toBe(`${mode}; source=request-header`)
        expect(() => decodeUpstream(r, a.upstream), mode).not.toThrow()
        const b = await send(r, mode)
        expect(JSON.stringify(b.upstream), `${mode}: the same request twice gives the same upstream body`).toBe(JSON.stringify(a.upstream))
        expect(toolsOf(a.upstream), mode).toStrictEqual(toolsOf(off.upstream))
        expectOnlyTexts(off.upstream, a.upstream, texts, "body", { n: 0 })
      }
    })
  }

  const withTools = all.filter((r) => segmentsOf(r.family as FormatId, r.endpoint, r.body).some((s) => s.segment.kind === "tool-result"))

  it("the recordings with tool results: every agent that ran a tool", () => {
    const names = new Set(withTools.map((r) => r.name.split("#")[0]))
    for (const agent of [
      "claude-p-toolcall-bearer",
      "codex-exec-custom-provider-toolcall",
      "kilo-run-openai-compatible-toolcall",
      "qwen-p-toolcall-yolo",
      "gemini-p-toolcall",
      "opencode-run-openai-compatible-toolcall"
    ]) {
      expect(
        [...names].some((n) => n === `cli/${agent}`),
        agent
      ).toBe(true)
    }
  })

  for (const r of withTools) {
    it(`${r.name}: a long noisy tool output reaches the upstream compressed (caveman leaves tool results alone)`, async () => {
      const format = r.family as FormatId
      const inject = (output: string) => mapSegments(format, r.endpoint, r.body, (text, s) => (s.kind === "tool-result" ? output : text))!
      const resultsOf = (body: Json) =>
        segmentsOf(format, r.endpoint, body)
          .filter((s) => s.segment.kind === "tool-result")
          .map((s) => s.text)
      for (const [mode, output] of [
        ["default", NOISY],
        ["engine:rtk", NOISY],
        ["engine:whitespace", NOISY],
        ["engine:json", PRETTY],
        ["default", PRETTY],
        ["engine:caveman", NOISY]
      ] as const) {
        const body = inject(output)
        const injected = resultsOf(body)
        expect(injected.length).toBeGreaterThan(0)
        expect(injected.every((t) => t === output)).toBe(true)
        // With compression off the tool results arrive whole, but for the input sanitizer (INPUT_SANITIZER_ENABLED,
        // on by default, before any compression): it drops terminal escapes and control characters.
        const off = await send(r, "off", body)
        const plain = resultsOf(off.upstream)
        expect(plain).toStrictEqual(injected.map(sanitizeText))
        const { upstream } = await send(r, mode, body)
        const got = resultsOf(upstream)
        expect(got.length, mode).toBe(injected.length)
        got.forEach((t, i) => {
          if (mode === "engine:caveman") expect(t).toBe(plain[i])
          else expect(t.length, `${mode}: ${t.slice(0, 300)}`).toBeLessThan(plain[i]!.length * (mode === "engine:whitespace" ? 0.97 : 0.7))
        })
        if (mode === "engine:json") for (const t of got) expect(t).toBe(JSON.stringify(JSON.parse(PRETTY)))
        // The default combo runs json before rtk: a 485-line pretty JSON is minified whole (one line, a
        // third of the size), not cut head-and-tail by rtk.
        if (mode === "default" && output === PRETTY) for (const t of got) expect(t).toBe(JSON.stringify(JSON.parse(PRETTY)))
        // Still only texts changed, with the injected outputs as the texts.
        expectOnlyTexts(off.upstream, upstream, new Set(segmentsOf(format, r.endpoint, off.upstream).map((s) => s.text)), "body", { n: 0 })
      }
    })
  }
})

describe("prompt caches across a conversation's requests", () => {
  /** The system prompt texts of a body, in its own format. */
  const systemOf = (r: Recorded, body: Json) =>
    segmentsOf(r.family as FormatId, r.endpoint, body)
      .filter((s) => s.segment.role === "system")
      .map((s) => s.text)
      .join("\n---\n")

  it.each(["default", "engine:caveman"])(
    "%s: a recording's requests with the same system prompt send the same compressed one upstream",
    async (mode) => {
      const byRecording = new Map<string, Map<string, Set<string>>>()
      let compared = 0
      for (const r of all) {
        const own = systemOf(r, r.body)
        if (own === "") continue
        const { upstream } = await send(r, mode)
        const recording = r.name.split("#")[0]!
        const seen = byRecording.get(recording) ?? byRecording.set(recording, new Map()).get(recording)!
        const sent = seen.get(own) ?? seen.set(own, new Set()).get(own)!
        sent.add(systemOf(r, upstream))
        if (sent.size > 0) compared++
      }
      expect(compared).toBeGreaterThan(40)
      for (const [recording, prompts] of byRecording) for (const sent of prompts.values()) expect(sent.size, recording).toBe(1)
      // The recordings where one system prompt opens several requests (first and later turns): there are some.
      expect([...byRecording.values()].flatMap((p) => [...p.values()]).length).toBeLessThan(compared)
    }
  )
})

describe("tokens saved on the recorded traffic (POST /api/compression/preview, o200k)", () => {
  it("per engine: never more tokens, and default and caveman save some", async () => {
    const table: Record<string, { before: number; after: number; requests: number; changed: number }> = {}
    for (const mode of MODES) {
      const row = (table[mode] = { before: 0, after: 0, requests: 0, changed: 0 })
      for (const r of all) {
        const body = { ...r.body }
        const res = await call(`${gw.url}/api/compression/preview`, {
          body: { format: r.family, endpoint: r.endpoint, body, mode, model: "openai/gpt-4o" },
          headers: { authorization: `Bearer ${ADMIN}` }
        })
        expect(res.status, res.text).toBe(200)
        expect(res.body.tokenizer).toBe("o200k")
        expect(res.body.tokensAfter, `${r.name} ${mode}`).toBeLessThanOrEqual(res.body.tokensBefore)
        row.before += res.body.tokensBefore
        row.after += res.body.tokensAfter
        row.requests++
        if (res.body.tokensAfter < res.body.tokensBefore) row.changed++
      }
    }
    const lines = ["| mode | requests | changed | tokens before | tokens after | saved | saved % |", "|---|---:|---:|---:|---:|---:|---:|"]
    for (const [mode, t] of Object.entries(table)) {
      lines.push(
        `| ${mode} | ${t.requests} | ${t.changed} | ${t.before} | ${t.after} | ${t.before - t.after} | ${(((t.before - t.after) / t.before) * 100).toFixed(2)}% |`
      )
    }
    console.log(`\n${lines.join("\n")}\n`)
    if (process.env.COMPRESSION_TABLE) fs.writeFileSync(process.env.COMPRESSION_TABLE, lines.join("\n") + "\n")
    expect(table["default"]!.after).toBeLessThan(table["default"]!.before)
    expect(table["engine:caveman"]!.after).toBeLessThan(table["engine:caveman"]!.before)
  })
})
