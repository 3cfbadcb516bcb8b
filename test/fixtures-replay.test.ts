import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { agentResponder, SEEN } from "./agents/responder.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Every HTTP request that real SDKs and coding agents were recorded sending (`test/fixtures/clients`),
 * replayed byte for byte (but for the key) through the gateway to an upstream of a *different* family than
 * the client speaks, so each one is translated. The strict fake upstream rejects what the real API would
 * reject; the gateway must answer every request 200 in the client's own format.
 */
const FIXTURES = path.resolve(__dirname, "fixtures/clients")
const ADMIN = "gwk_replay_admin_key_0123456789abcdef"
const KEY = "gwk_replay_client_key_0123456789abcd"

interface Recording {
  readonly method: string
  readonly path: string
  readonly query: Record<string, string>
  readonly headers: Record<string, string>
  readonly body: unknown
}

interface Case {
  readonly name: string
  readonly request: Recording
}

/** Connections, each serving models whose clients speak another family (lower priority wins a shared id). */
const CONNECTIONS: ReadonlyArray<{ family: Family; connection: Record<string, unknown> }> = [
  {
    family: "openai-chat",
    connection: {
      provider: "openai-compatible",
      name: "to-chat",
      priority: 1,
      models: ["claude-opus-5-5", "claude-sonnet-4-5", "claude-haiku-4-5-20251001", "nomic-embed-text", "text-embedding-004"]
    }
  },
  {
    family: "openai-responses",
    connection: {
      provider: "openai-compatible",
      name: "to-resp",
      priority: 1,
      upstreamFormat: "openai-responses",
      models: ["gemini-2.5-flash", "gemini-3.1-pro-preview", "gemini-3.5-flash-lite", "gemini-3.8-flash"]
    }
  },
  { family: "ollama", connection: { provider: "ollama", name: "to-oll", priority: 1, models: ["fake-model"] } },
  {
    family: "anthropic",
    connection: { provider: "anthropic", name: "to-anth", priority: 5, apiKey: "sk-ant-upstream", models: ["gpt-5", "gpt-5.4-nano"] }
  },
  {
    family: "gemini",
    connection: {
      provider: "gemini",
      name: "to-gem",
      priority: 5,
      apiKey: "gemini-upstream-key",
      models: ["qwen3-coder-plus", "llama3", "text-embedding-3-small"]
    }
  }
]

const clientFamily = (p: string): Family | undefined =>
  p === "/v1/chat/completions" || p === "/v1/embeddings"
    ? "openai-chat"
    : p === "/v1/responses"
      ? "openai-responses"
      : p.startsWith("/v1/messages")
        ? "anthropic"
        : /^\/v1(beta)?\/models\/[^/]+:/.test(p)
          ? "gemini"
          : p.startsWith("/api/")
            ? "ollama"
            : undefined

const loadCases = (): Array<Case> => {
  const cases: Array<Case> = []
  for (const file of fs
    .readdirSync(path.join(FIXTURES, "cli"))
    // Codex's compaction requests answer a sealed summary, not the model's text: test/responses-compaction.test.ts replays them.
    .filter((f) => f.endsWith(".jsonl") && !f.includes("compact"))
    .sort()) {
    const lines = fs
      .readFileSync(path.join(FIXTURES, "cli", file), "utf8")
      .split("\n")
      .filter((l) => l.trim())
    lines.forEach((line, i) => {
      const r = JSON.parse(line) as Recording & { headers: Record<string, string> }
      if (r.headers["upgrade"] || !["GET", "POST", "HEAD"].includes(r.method)) return
      cases.push({ name: `${file.replace(/\.requests\.jsonl$/, "")} #${i + 1} ${r.method} ${r.path}`, request: r })
    })
  }
  for (const file of fs
    .readdirSync(path.join(FIXTURES, "sdk"))
    .filter((f) => f.endsWith(".json") && !f.startsWith("_"))
    .sort()) {
    const recorded = JSON.parse(fs.readFileSync(path.join(FIXTURES, "sdk", file), "utf8")) as { requests?: Array<Recording> }
    for (const [i, r] of (recorded.requests ?? []).entries())
      cases.push({ name: `sdk ${file.replace(/\.json$/, "")} #${i + 1} ${r.method} ${r.path}`, request: r })
  }
  return cases
}

const AUTH_HEADERS = new Set(["authorization", "x-api-key", "x-goog-api-key", "api-key"])
const HOP_HEADERS = new Set(["host", "connection", "content-length", "accept-encoding", "transfer-encoding"])

/** The recorded request with the gateway's key in whichever header the client used. */
const replay = async (r: Recording) => {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(r.headers)) {
    const lower = name.toLowerCase()
    if (HOP_HEADERS.has(lower)) continue
    headers[lower] = AUTH_HEADERS.has(lower) ? (lower === "authorization" ? `Bearer ${KEY}` : KEY) : String(value)
  }
  // Recorded against a gateway without keys (Codex with only openai_base_url): a user would add one.
  if (!Object.keys(headers).some((h) => AUTH_HEADERS.has(h)) && !("key" in r.query)) headers["authorization"] = `Bearer ${KEY}`
  const query = new URLSearchParams(r.query)
  if (query.has("key")) query.set("key", KEY)
  const url = `${gw.url}${r.path}${query.size ? `?${query}` : ""}`
  const res = await fetch(url, {
    method: r.method,
    headers,
    body: r.body === null || r.body === undefined ? undefined : JSON.stringify(r.body)
  })
  return { status: res.status, contentType: res.headers.get("content-type") ?? "", text: await res.text() }
}

let gw: TestGateway
let up: FakeUpstream

beforeAll(async () => {
  up = await FakeUpstream.start()
  // Whole text in one stream event, so the answer can be looked for in any format's stream.
  up.script((r) => ({ chunks: 1, ...agentResponder(r) }))
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  for (const { family, connection } of CONNECTIONS) {
    const res = await call(`${gw.url}/api/providers`, {
      body: { ...connection, baseUrl: up.baseUrl(family) },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

const cases = loadCases()

describe("recorded client traffic, replayed through the gateway to another upstream family", () => {
  it("found the recordings", () => {
    expect(cases.length).toBeGreaterThan(150)
  })

  for (const { name, request } of cases) {
    it(name, async () => {
      const before = up.requests.length
      const violations = up.violations.length
      const res = await replay(request)
      expect(res.status, res.text.slice(0, 600)).toBe(200)
      expect(up.violations.slice(violations)).toEqual([])
      const inbound = clientFamily(request.path)
      const sent = up.requests.slice(before)
      // Whatever reached an upstream went to one of another family (count_tokens and model lists may stay local).
      if (inbound) for (const s of sent) expect(s.family).not.toBe(inbound)
      if (request.method !== "POST") return
      const op = request.path
      if (/count_?tokens/i.test(op)) {
        expect(res.text).toMatch(/"(input_tokens|totalTokens)":\s*\d+/)
      } else if (/embed/i.test(op)) {
        const body = JSON.parse(res.text)
        const vectors: Array<unknown> =
          body.data?.map((d: any) => d.embedding) ?? body.embeddings?.map((e: any) => (Array.isArray(e) ? e : e.values)) ?? []
        expect(vectors.length).toBeGreaterThan(0)
        for (const v of vectors)
          expect(typeof v === "string" ? Buffer.from(v, "base64").length : (v as Array<number>).length).toBeGreaterThan(0)
        // Counted by the upstream, or by the gateway when the upstream (Gemini) reports no count.
        expect(body.usage?.prompt_tokens ?? body.prompt_eval_count ?? 1).toBeGreaterThan(0)
        expect(sent).toHaveLength(1)
      } else {
        expect(sent).toHaveLength(1)
        // A stream ends without an in-stream error, and the answer is the fake model's, translated.
        expect(res.text).not.toMatch(/"type":\s*"(error|response\.failed)"|event: error/)
        const answer = agentResponder(sent[0]!)
        if (answer.toolCalls) for (const c of answer.toolCalls) expect(res.text).toContain(`"${c.name}"`)
        else expect(res.text).toContain(answer.content!.slice(0, SEEN.length + 1))
      }
    })
  }
})
