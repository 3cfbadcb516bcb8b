import * as crypto from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * Fake rerank and moderation upstreams: a real HTTP server on 127.0.0.1 speaking each family's
 * wire shape (docs/media.md; research: Cohere V2RerankRequest, Jina and Voyage rerank, OpenAI
 * moderations.d.ts, Mistral ChatModerationRequest). One server holds every family under its
 * own prefix; `baseUrl(family)` is what a connection of that provider takes as its base URL:
 *
 * - `cohere`  `POST /cohere/v2/rerank`   bare origin (Cohere's SDK adds /v2)
 * - `jina`    `POST /jina/v1/rerank`     bare origin
 * - `voyage`  `POST /voyage/v1/rerank`   bare origin
 * - `compat`  `POST /compat/v1/rerank`   base URL with /v1 (Together, OpenAI-compatible: Cohere v1 / Jina shape)
 * - `openai`  `POST /openai/v1/moderations`
 * - `mistral` `POST /mistral/v1/moderations`
 *
 * Each checks the bearer key and the fields its API takes (a field the API does not know is a
 * 400 or 422, as strict validators answer), so a test sees what the gateway sent. Scores are
 * deterministic: the share of the query's words found in the document.
 */
export type RerankFamily = "cohere" | "jina" | "voyage" | "compat" | "openai" | "mistral"

export interface Seen {
  readonly family: RerankFamily
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: any
}

/** Tokens as the fakes count them (Jina, Voyage, Together report `usage.total_tokens`): ceil(chars / 4) of the query and of each document.
 * */
export const rerankTokens = (query: string, documents: ReadonlyArray<string>): number =>
  [query, ...documents].reduce((n, t) => n + Math.ceil(t.length / 4), 0)

const words = (t: string): Set<string> => new Set(t.toLowerCase().match(/[a-z0-9]+/g) ?? [])

/** The relevance of each document, most relevant first (ties: lower index first). */
const rank = (query: string, documents: ReadonlyArray<string>): Array<{ index: number; relevance_score: number }> => {
  const q = words(query)
  return documents
    .map((d, index) => {
      const w = words(d)
      const shared = [...q].filter((x) => w.has(x)).length
      return { index, relevance_score: Math.round((shared / Math.max(1, q.size)) * 0.9 * 1e6) / 1e6 + 0.01 }
    })
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
}

const FIELDS: Record<"cohere" | "jina" | "voyage" | "compat", ReadonlyArray<string>> = {
  // cohere-typescript V2RerankRequest
  cohere: ["model", "query", "documents", "top_n", "max_tokens_per_doc"],
  jina: ["model", "query", "documents", "top_n", "return_documents"],
  // voyageai RerankRequest: top_k, not top_n
  voyage: ["model", "query", "documents", "top_k", "return_documents", "truncation"],
  // Together (Cohere-compatible v1) / vLLM
  compat: ["model", "query", "documents", "top_n", "return_documents", "rank_fields"]
}

/** Words that make the fake moderators score high (text only). */
const OPENAI_TRIGGERS: Record<string, Record<string, number>> = {
  kill: { violence: 0.93, "harassment/threatening": 0.61 },
  hate: { hate: 0.81 }
}
const MISTRAL_CATEGORIES = [
  "sexual",
  "hate_and_discrimination",
  "violence_and_threats",
  "dangerous_and_criminal_content",
  "selfharm",
  "health",
  "financial",
  "law",
  "pii"
]
/** [score, Mistral's own boolean]: Mistral's booleans follow its own per-category thresholds. */
const MISTRAL_TRIGGERS: Record<string, Record<string, [number, boolean]>> = {
  kill: { violence_and_threats: [0.91, true] },
  pills: { health: [0.82, true] },
  phone: { pii: [0.77, true] },
  bomb: { dangerous_and_criminal_content: [0.55, false] },
  sad: { selfharm: [0.45, false] }
}
const OPENAI_CATEGORIES = [
  "harassment",
  "harassment/threatening",
  "hate",
  "hate/threatening",
  "illicit",
  "illicit/violent",
  "self-harm",
  "self-harm/instructions",
  "self-harm/intent",
  "sexual",
  "sexual/minors",
  "violence",
  "violence/graphic"
]
const IMAGE_CATEGORIES = new Set(["self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "violence", "violence/graphic"])

export class FakeRerank {
  readonly seen: Array<Seen> = []
  /** Status codes the next requests answer with (each family's error shape), first in first out. */
  private readonly failures: Array<number> = []
  private alwaysStatus: number | undefined
  /** Bodies the next requests answer with (status 200, as they are), first in first out. */
  private readonly bodies: Array<unknown> = []

  private constructor(
    private readonly server: http.Server,
    readonly origin: string,
    readonly key: string
  ) {}

  static async start(key = "sk-fake-rerank-key-0123456789"): Promise<FakeRerank> {
    let self: FakeRerank | undefined
    const server = http.createServer((req, res) => self!.handle(req, res))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    self = new FakeRerank(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`, key)
    return self
  }

  baseUrl(family: RerankFamily): string {
    return family === "compat" || family === "openai" || family === "mistral" ? `${this.origin}/${family}/v1` : `${this.origin}/${family}`
  }

  /** The next `count` requests answer `status`. */
  fail(status: number, count = 1): void {
    for (let i = 0; i < count; i++) this.failures.push(status)
  }

  /** The next request answers 200 with `body` as it is (a broken answer). */
  answerOnce(body: unknown): void {
    this.bodies.push(body)
  }

  /** Every request answers `status` (undefined: back to normal). */
  always(status: number | undefined): void {
    this.alwaysStatus = status
  }

  last(family: RerankFamily): Seen | undefined {
    return this.seen.filter((s) => s.family === family).at(-1)
  }

  close(): Promise<void> {
    this.server.closeAllConnections()
    return new Promise((resolve) => this.server.close(() => resolve()))
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0]!
      const m = /^\/(cohere|jina|voyage|compat)\/v[12]\/rerank$|^\/(openai|mistral)\/v1\/moderations$/.exec(path)
      const family = (m?.[1] ?? m?.[2]) as RerankFamily | undefined
      let body: any
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      } catch {
        body = undefined
      }
      if (
        !family ||
        req.method !== "POST" ||
        (family === "cohere" ? !path.endsWith("/v2/rerank") : family !== "openai" && family !== "mistral" && !path.endsWith("/v1/rerank"))
      ) {
        return send(res, 404, { message: `no route ${req.method} ${path}` })
      }
      this.seen.push({ family, path, headers: req.headers, body })
      if (req.headers.authorization !== `Bearer ${this.key}`) return this.error(res, family, 401, "invalid api key")
      const status = this.failures.shift() ?? this.alwaysStatus
      if (status !== undefined)
        return this.error(res, family, status, status === 503 ? "service unavailable, try again" : `failure ${status}`)
      if (this.bodies.length > 0) return send(res, 200, this.bodies.shift())
      if (family === "openai") return this.openAi(res, body)
      if (family === "mistral") return this.mistral(res, body)
      return this.rerank(res, family, body)
    })
  }

  /** Each family's error body: Cohere `{message}`, Jina and Voyage `{detail}`, OpenAI-shaped for the rest. */
  private error(res: http.ServerResponse, family: RerankFamily, status: number, message: string): void {
    if (family === "cohere") return send(res, status, { message })
    if (family === "jina" || family === "voyage") return send(res, status, { detail: message })
    if (family === "mistral") return send(res, status, { object: "error", message, type: "invalid_request_error", param: null, code: null })
    return send(res, status, {
      error: { message, type: status === 401 ? "invalid_request_error" : "server_error", param: null, code: null }
    })
  }

  private rerank(res: http.ServerResponse, family: "cohere" | "jina" | "voyage" | "compat", body: any): void {
    const unknown = Object.keys(body ?? {}).filter((k) => !FIELDS[family].includes(k))
    if (unknown.length > 0) return this.error(res, family, family === "cohere" ? 400 : 422, `unknown field(s): ${unknown.join(", ")}`)
    const { model, query, documents } = body
    if (
      typeof model !== "string" ||
      typeof query !== "string" ||
      !Array.isArray(documents) ||
      !documents.every((d: unknown) => typeof d === "string")
    ) {
      return this.error(res, family, family === "cohere" ? 400 : 422, "model, query and documents (strings) are required")
    }
    const top = family === "voyage" ? body.top_k : body.top_n
    const ranked = rank(query, documents).slice(0, typeof top === "number" ? top : documents.length)
    const tokens = rerankTokens(query, documents)
    switch (family) {
      case "cohere":
        return send(res, 200, {
          id: crypto.randomUUID(),
          results: ranked,
          meta: { api_version: { version: "2" }, billed_units: { search_units: Math.ceil(documents.length / 100) } }
        })
      case "jina":
        // Jina returns the documents unless told not to.
        return send(res, 200, {
          model,
          usage: { total_tokens: tokens, prompt_tokens: tokens },
          results: ranked.map((r) => (body.return_documents === false ? r : { ...r, document: { text: documents[r.index] } }))
        })
      case "voyage":
        return send(res, 200, {
          object: "list",
          data: ranked.map((r) => (body.return_documents === true ? { ...r, document: documents[r.index] } : r)),
          model,
          usage: { total_tokens: tokens }
        })
      case "compat":
        return send(res, 200, {
          id: `rerank-${crypto.randomUUID()}`,
          object: "rerank",
          model,
          results: ranked.map((r) => (body.return_documents === true ? { ...r, document: { text: documents[r.index] } } : r)),
          usage: { prompt_tokens: tokens, completion_tokens: 0, total_tokens: tokens }
        })
    }
  }

  /** OpenAI: one result per string; one for a multimodal array (its image parts scored for the image categories). */
  private openAi(res: http.ServerResponse, body: any): void {
    const input = body?.input
    const texts: Array<{ text: string; image: boolean }> =
      typeof input === "string"
        ? [{ text: input, image: false }]
        : Array.isArray(input) && input.every((i: unknown) => typeof i === "string")
          ? input.map((t: string) => ({ text: t, image: false }))
          : Array.isArray(input)
            ? [
                {
                  text: input
                    .filter((p: any) => p?.type === "text")
                    .map((p: any) => p.text)
                    .join(" "),
                  image: input.some((p: any) => p?.type === "image_url")
                }
              ]
            : []
    if (texts.length === 0) return this.error(res, "openai", 400, "input is required")
    const result = ({ text, image }: { text: string; image: boolean }) => {
      const scores: Record<string, number> = Object.fromEntries(OPENAI_CATEGORIES.map((c) => [c, 0.0001]))
      for (const [word, hits] of Object.entries(OPENAI_TRIGGERS)) if (text.toLowerCase().includes(word)) Object.assign(scores, hits)
      const categories = Object.fromEntries(OPENAI_CATEGORIES.map((c) => [c, scores[c]! >= 0.5]))
      return {
        flagged: Object.values(categories).some(Boolean),
        categories,
        category_scores: scores,
        category_applied_input_types: Object.fromEntries(
          OPENAI_CATEGORIES.map((c) => [c, image && IMAGE_CATEGORIES.has(c) ? ["text", "image"] : ["text"]])
        )
      }
    }
    send(res, 200, {
      id: `modr-${crypto.randomUUID().slice(0, 8)}`,
      model: body.model === "omni-moderation-latest" ? "omni-moderation-2024-09-26" : body.model,
      results: texts.map(result)
    })
  }

  /** Mistral: text only (a string or strings; anything else is a 422), nine categories, no `flagged`. */
  private mistral(res: http.ServerResponse, body: any): void {
    const input = body?.input
    const texts: Array<string> | undefined =
      typeof input === "string"
        ? [input]
        : Array.isArray(input) && input.length > 0 && input.every((i: unknown) => typeof i === "string")
          ? input
          : undefined
    if (!texts || typeof body.model !== "string")
      return this.error(res, "mistral", 422, "input must be a string or a list of strings; model is required")
    const unknown = Object.keys(body).filter((k) => k !== "model" && k !== "input")
    if (unknown.length > 0) return this.error(res, "mistral", 422, `extra inputs are not permitted: ${unknown.join(", ")}`)
    const result = (text: string) => {
      const scores: Record<string, number> = Object.fromEntries(MISTRAL_CATEGORIES.map((c) => [c, 0.0002]))
      const categories: Record<string, boolean> = Object.fromEntries(MISTRAL_CATEGORIES.map((c) => [c, false]))
      for (const [word, hits] of Object.entries(MISTRAL_TRIGGERS)) {
        if (!text.toLowerCase().includes(word)) continue
        for (const [c, [score, flag]] of Object.entries(hits)) {
          scores[c] = score
          categories[c] = flag
        }
      }
      return { categories, category_scores: scores }
    }
    send(res, 200, { id: crypto.randomUUID().replace(/-/g, ""), model: body.model, results: texts.map(result) })
  }
}

const send = (res: http.ServerResponse, status: number, body: unknown): void => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}
