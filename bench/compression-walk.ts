/**
 * Where the tokens of real coding-agent requests are (docs/compression.md, "Where the text is"):
 * the recorded CLI requests (test/fixtures/clients/cli) walked by src/services/context/walk.ts, o200k
 * tokens per segment role and kind, per agent; plus what one walk costs (identity fn, so the
 * body is only read) and what the estimate adds.
 *
 *   npx vite-node bench/compression-walk.ts
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { FormatId } from "../src/domain/canonical.js"
import { approximateTokens, estimateTokensSync, loadTokenizer } from "../src/services/context/estimate.js"
import { mapSegments, segmentsOf } from "../src/services/context/walk.js"
import { loadCounter } from "../src/upstream/formats/tokens.js"

const CLI = path.resolve(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), "../test/fixtures/clients/cli")

interface Req {
  readonly agent: string
  readonly format: FormatId
  readonly endpoint: string
  readonly body: Record<string, unknown>
}

const classify = (agent: string, r: { method?: string; path?: string; body?: unknown }): Req | undefined => {
  const body = r.body as Record<string, unknown> | null
  if (!body || typeof body !== "object") return undefined
  const p = r.path ?? ""
  if (r.method === "WS" && body["type"] === "response.create") return { agent, format: "openai-responses", endpoint: "responses.ws", body }
  if (r.method !== "POST") return undefined
  if (p === "/v1/chat/completions") return { agent, format: "openai-chat", endpoint: "chat.completions", body }
  if (p === "/v1/responses") return { agent, format: "openai-responses", endpoint: "responses", body }
  if (p === "/v1/messages") return { agent, format: "anthropic", endpoint: "messages", body }
  if (/:(stream)?[gG]enerateContent$/.test(p)) return { agent, format: "gemini", endpoint: "generateContent", body }
  return undefined
}

const requests: Array<Req> = []
for (const file of fs
  .readdirSync(CLI)
  .filter((f) => f.endsWith(".requests.jsonl") && !f.startsWith("all-clients"))
  .sort()) {
  const agent = file.split("-")[0]!
  for (const line of fs.readFileSync(path.join(CLI, file), "utf8").split("\n")) {
    if (!line.trim()) continue
    const r = classify(agent, JSON.parse(line))
    if (r) requests.push(r)
  }
}

const count = await loadCounter()
await loadTokenizer()
const byAgent = new Map<string, Record<string, number>>()
for (const r of requests) {
  const row = byAgent.get(r.agent) ?? {}
  for (const { text, segment } of segmentsOf(r.format, r.endpoint, r.body)) {
    const key = segment.kind === "tool-result" ? "tool-result" : segment.role
    row[key] = (row[key] ?? 0) + count(text)
  }
  row["estimate"] = (row["estimate"] ?? 0) + estimateTokensSync(r.format, r.endpoint, r.body)
  row["chars/4"] = (row["chars/4"] ?? 0) + approximateTokens(r.format, r.endpoint, r.body)
  row["requests"] = (row["requests"] ?? 0) + 1
  byAgent.set(r.agent, row)
}
console.log("o200k tokens per agent (all its recorded requests), by segment:")
console.table(Object.fromEntries(byAgent))

const ROUNDS = 200
const identity = (t: string) => t
const t0 = process.hrtime.bigint()
for (let i = 0; i < ROUNDS; i++) for (const r of requests) mapSegments(r.format, r.endpoint, r.body, identity)
const walkUs = Number(process.hrtime.bigint() - t0) / 1000 / (ROUNDS * requests.length)
const t1 = process.hrtime.bigint()
for (let i = 0; i < 20; i++) for (const r of requests) estimateTokensSync(r.format, r.endpoint, r.body)
const estimateUs = Number(process.hrtime.bigint() - t1) / 1000 / (20 * requests.length)
const t2 = process.hrtime.bigint()
for (let i = 0; i < ROUNDS; i++) for (const r of requests) approximateTokens(r.format, r.endpoint, r.body)
const approxUs = Number(process.hrtime.bigint() - t2) / 1000 / (ROUNDS * requests.length)
const bytes = requests.reduce((n, r) => n + JSON.stringify(r.body).length, 0) / requests.length
console.log(
  `${requests.length} requests, ${(bytes / 1024).toFixed(0)} KiB of JSON on average; per request: walk (identity) ${walkUs.toFixed(1)} µs, ` +
    `estimate (o200k) ${estimateUs.toFixed(0)} µs, approximate (chars/4) ${approxUs.toFixed(1)} µs`
)
