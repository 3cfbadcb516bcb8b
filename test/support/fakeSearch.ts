import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * Fake web search upstreams: one real HTTP server on 127.0.0.1 speaking the five wire shapes of
 * docs/search.md ("Web search"), each under its own prefix; `baseUrl(family)` is what a
 * connection of that provider takes as its base URL:
 *
 * - `tavily`  `POST /tavily/search`                 `Authorization: Bearer <key>`  JSON `{query, max_results, search_depth, ...}`
 * - `brave`   `GET  /brave/res/v1/web/search?q&count` `X-Subscription-Token: <key>`
 * - `exa`     `POST /exa/search`                    `x-api-key: <key>`             JSON `{query, numResults, contents, ...}`
 * - `searxng` `GET  /searxng/search?q&format=json`  no key (any credential header is refused)
 * - `serper`  `POST /serper/search`                 `X-API-KEY: <key>`             JSON `{q, num, tbs?}`
 *
 * Each refuses a wrong path, method or credential (401/404/405) and a field its API does not
 * know (400 naming it), so a test sees exactly what the gateway sent. Results are made from the
 * query: `count` of them (Brave's `count`, Tavily's `max_results`...; SearXNG always 10), their
 * hosts cycling through docs.example.com, news.example.org and blog.example.net.
 */
export type SearchFamily = "tavily" | "brave" | "exa" | "searxng" | "serper"

export interface SeenSearch {
  readonly family: SearchFamily
  readonly method: string
  /** Path without the family prefix, query string excluded. */
  readonly path: string
  readonly params: Record<string, string>
  readonly headers: http.IncomingHttpHeaders
  readonly body: any
}

export const HOSTS = ["docs.example.com", "news.example.org", "blog.example.net"]
/** The published dates the fakes give (where the provider gives one). */
export const PUBLISHED = "2025-03-01T12:00:00.000Z"

const FIELDS: Record<"tavily" | "exa" | "serper", ReadonlyArray<string>> = {
  // tavily-python TavilyClient.search
  tavily: [
    "query",
    "max_results",
    "search_depth",
    "topic",
    "time_range",
    "days",
    "include_domains",
    "exclude_domains",
    "include_answer",
    "include_raw_content",
    "include_images",
    "chunks_per_source",
    "country",
    "auto_parameters"
  ],
  // exa-py search / search_and_contents
  exa: [
    "query",
    "numResults",
    "includeDomains",
    "excludeDomains",
    "startPublishedDate",
    "endPublishedDate",
    "startCrawlDate",
    "endCrawlDate",
    "type",
    "category",
    "contents",
    "useAutoprompt"
  ],
  serper: ["q", "num", "tbs", "gl", "hl", "page", "location", "autocorrect"]
}
const PARAMS: Record<"brave" | "searxng", ReadonlyArray<string>> = {
  brave: [
    "q",
    "count",
    "offset",
    "freshness",
    "country",
    "search_lang",
    "ui_lang",
    "safesearch",
    "text_decorations",
    "spellcheck",
    "result_filter",
    "extra_snippets",
    "summary"
  ],
  searxng: ["q", "format", "time_range", "categories", "engines", "language", "pageno", "safesearch"]
}

const made = (query: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({
    i,
    title: `${query} — result ${i + 1}`,
    url: `https://${HOSTS[i % HOSTS.length]}/${encodeURIComponent(query.toLowerCase().replace(/\s+/g, "-"))}/${i + 1}`,
    text: `About ${query}: page ${i + 1}.`,
    score: Math.round((1 - i / 20) * 1000) / 1000
  }))

export class FakeSearch {
  readonly seen: Array<SeenSearch> = []
  private readonly failures: Array<number> = []
  private alwaysStatus: number | undefined
  /** Held this long before answering (coalescing tests). */
  delayMs = 0

  private constructor(
    private readonly server: http.Server,
    readonly key: string
  ) {}

  static async start(key = "sk-fake-search-key-0123456789abcdef"): Promise<FakeSearch> {
    let fake: FakeSearch | undefined
    const server = http.createServer((req, res) => fake!.handle(req, res))
    fake = new FakeSearch(server, key)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    return fake
  }

  get origin(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  baseUrl(family: SearchFamily): string {
    return `${this.origin}/${family}`
  }

  /** Upstream calls of a family (all when none given). */
  calls(family?: SearchFamily): Array<SeenSearch> {
    return family ? this.seen.filter((s) => s.family === family) : this.seen
  }

  last(family: SearchFamily): SeenSearch | undefined {
    return this.calls(family).at(-1)
  }

  failNext(...statuses: Array<number>): void {
    this.failures.push(...statuses)
  }

  always(status: number | undefined): void {
    this.alwaysStatus = status
  }

  close(): Promise<void> {
    this.server.closeAllConnections()
    return new Promise((resolve) => this.server.close(() => resolve()))
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const send = (status: number, body: unknown) => {
        const payload = JSON.stringify(body)
        setTimeout(() => {
          res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(payload) })
          res.end(payload)
        }, this.delayMs)
      }
      const url = new URL(req.url ?? "/", this.origin)
      const [, family, ...rest] = url.pathname.split("/")
      if (!["tavily", "brave", "exa", "searxng", "serper"].includes(family ?? "")) return send(404, { error: "no such family" })
      const f = family as SearchFamily
      const path = "/" + rest.join("/")
      const raw = Buffer.concat(chunks).toString("utf8")
      let body: any
      if (raw) {
        try {
          body = JSON.parse(raw)
        } catch {
          return send(400, { error: "body is not JSON" })
        }
      }
      const params = Object.fromEntries(url.searchParams)
      this.seen.push({ family: f, method: req.method ?? "", path, params, headers: req.headers, body })
      const status = this.failures.shift() ?? this.alwaysStatus
      // An error that echoes the credential it got, as careless upstreams do: the gateway must scrub it.
      if (status !== undefined) return send(status, { error: { message: `service unavailable for key ${this.key}` } })
      const want = (method: string, p: string) => req.method === method && path === p
      const h = req.headers
      switch (f) {
        case "tavily": {
          if (!want("POST", "/search")) return send(404, { detail: { error: `no route ${req.method} ${path}` } })
          if (h.authorization !== `Bearer ${this.key}`) return send(401, { detail: { error: "Unauthorized: missing or invalid API key." } })
          const unknown = Object.keys(body ?? {}).find((k) => !FIELDS.tavily.includes(k))
          if (unknown) return send(400, { detail: { error: `unknown field ${unknown}` } })
          if (typeof body?.query !== "string") return send(400, { detail: { error: "query is required" } })
          let rows = made(body.query, body.max_results ?? 5)
          if (Array.isArray(body.include_domains) && body.include_domains.length > 0)
            rows = rows.filter((r) => body.include_domains.some((d: string) => new URL(r.url).hostname.endsWith(d)))
          return send(200, {
            query: body.query,
            answer: null,
            images: [],
            results: rows.map((r) => ({
              title: r.title,
              url: r.url,
              content: r.text,
              score: r.score,
              raw_content: null,
              ...(body.topic === "news" ? { published_date: "Sat, 01 Mar 2025 12:00:00 GMT" } : {})
            })),
            response_time: 0.42
          })
        }
        case "brave": {
          if (!want("GET", "/res/v1/web/search"))
            return send(404, { type: "ErrorResponse", error: { status: 404, detail: `no route ${req.method} ${path}` } })
          if (h["x-subscription-token"] !== this.key)
            return send(401, { type: "ErrorResponse", error: { status: 401, code: "SUBSCRIPTION_TOKEN_INVALID" } })
          const unknown = Object.keys(params).find((k) => !PARAMS.brave.includes(k))
          if (unknown) return send(422, { type: "ErrorResponse", error: { status: 422, detail: `unknown parameter ${unknown}` } })
          const count = Number(params["count"] ?? 20)
          if (!params["q"] || !(count >= 1 && count <= 20))
            return send(422, { type: "ErrorResponse", error: { status: 422, detail: "q and count 1..20" } })
          return send(200, {
            type: "search",
            query: { original: params["q"] },
            web: {
              type: "search",
              results: made(params["q"], count).map((r) => ({
                type: "search_result",
                title: r.title,
                url: r.url,
                description: `<strong>${params["q"]}</strong> &amp; more: ${r.text}`,
                page_age: "2025-03-01T12:00:00",
                age: "March 1, 2025"
              }))
            }
          })
        }
        case "exa": {
          if (!want("POST", "/search")) return send(404, { error: `no route ${req.method} ${path}` })
          if (h["x-api-key"] !== this.key) return send(401, { error: "invalid x-api-key" })
          const unknown = Object.keys(body ?? {}).find((k) => !FIELDS.exa.includes(k))
          if (unknown) return send(400, { error: `unknown field ${unknown}` })
          return send(200, {
            requestId: "exa-req-1",
            resolvedSearchType: "neural",
            results: made(body.query, body.numResults ?? 10).map((r) => ({
              id: r.url,
              title: r.title,
              url: r.url,
              publishedDate: PUBLISHED,
              author: null,
              score: r.score,
              text: r.text
            }))
          })
        }
        case "searxng": {
          if (!want("GET", "/search")) return send(404, { error: "Not Found" })
          if (h.authorization || h["x-api-key"]) return send(400, { error: "unexpected credentials" })
          const unknown = Object.keys(params).find((k) => !PARAMS.searxng.includes(k))
          if (unknown) return send(400, { error: `unknown parameter ${unknown}` })
          if (params["format"] !== "json") return send(403, { error: "format not enabled" })
          return send(200, {
            query: params["q"],
            number_of_results: 10,
            results: made(params["q"] ?? "", 10).map((r) => ({
              url: r.url,
              title: r.title,
              content: r.text,
              engine: "duckduckgo",
              engines: ["duckduckgo"],
              score: r.score * 2,
              publishedDate: r.i === 0 ? PUBLISHED : null
            })),
            answers: [],
            suggestions: []
          })
        }
        case "serper": {
          if (!want("POST", "/search")) return send(404, { message: "Not found" })
          if (h["x-api-key"] !== this.key) return send(403, { message: "Unauthorized.", statusCode: 403 })
          const unknown = Object.keys(body ?? {}).find((k) => !FIELDS.serper.includes(k))
          if (unknown) return send(400, { message: `unknown field ${unknown}`, statusCode: 400 })
          return send(200, {
            searchParameters: { q: body.q, type: "search", num: body.num ?? 10, engine: "google" },
            organic: made(body.q, body.num ?? 10).map((r) => ({
              title: r.title,
              link: r.url,
              snippet: r.text,
              position: r.i + 1,
              ...(r.i === 0 ? { date: "3 days ago" } : {})
            }))
          })
        }
      }
    })
  }
}
