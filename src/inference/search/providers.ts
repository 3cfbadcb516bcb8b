/**
 * The five web search APIs: one request and result shape, each provider's wire shape between (the shapes and their sources:
 * docs/search.md, "Web search"). `max_results` and the domain filters are applied here, whatever the provider.
 */
import { arr, num, obj, str } from "../../upstream/formats/common.js"
import type { CustomCall } from "../../upstream/client/executors.js"

export type SearchFamily = "tavily" | "brave" | "exa" | "searxng" | "serper"
export const SEARCH_FAMILIES: ReadonlyArray<SearchFamily> = ["tavily", "brave", "exa", "searxng", "serper"]
export const isSearchFamily = (id: string): id is SearchFamily => (SEARCH_FAMILIES as ReadonlyArray<string>).includes(id)

/** The pseudo-model every search provider lists: `<connection>/search`. */
export const SEARCH_MODEL = "search"

export type TimeRange = "day" | "week" | "month" | "year"
export const TIME_RANGES: ReadonlyArray<TimeRange> = ["day", "week", "month", "year"]
export type SearchDepth = "basic" | "advanced"
export type Topic = "general" | "news" | "finance"
export const MAX_RESULTS = 20
export const DEFAULT_RESULTS = 5

/** What the client asked, checked and normalised. */
export interface SearchAsk {
  readonly query: string
  readonly maxResults: number
  readonly searchDepth: SearchDepth
  readonly includeDomains: ReadonlyArray<string>
  readonly excludeDomains: ReadonlyArray<string>
  readonly timeRange: TimeRange | undefined
  readonly topic: Topic | undefined
}

/** One normalised result. */
export interface SearchResult {
  readonly title: string
  readonly url: string
  readonly snippet: string
  /** ISO 8601 when the provider gave a date that parses; null otherwise (relative dates such as "3 days ago" included). */
  readonly published_at: string | null
  /** The provider's own relevance score (not comparable across providers); null when it gives none. */
  readonly score: number | null
}

/** The request fields each provider honours itself (`max_results` and the domain filters are also enforced by the gateway). */
export const CAPABILITIES: Record<SearchFamily, ReadonlyArray<string>> = {
  tavily: ["query", "max_results", "search_depth", "include_domains", "exclude_domains", "time_range", "topic"],
  brave: ["query", "max_results", "time_range"],
  exa: ["query", "max_results", "include_domains", "exclude_domains", "time_range"],
  searxng: ["query", "time_range"],
  serper: ["query", "max_results", "time_range"]
}

/** Search units one request costs: Tavily's advanced depth is two credits; every other search is one. */
export const searchUnits = (family: SearchFamily, ask: SearchAsk): number => (family === "tavily" && ask.searchDepth === "advanced" ? 2 : 1)

const DAY_MS = 86_400_000
const RANGE_MS: Record<TimeRange, number> = { day: DAY_MS, week: 7 * DAY_MS, month: 30 * DAY_MS, year: 365 * DAY_MS }
const BRAVE_FRESHNESS: Record<TimeRange, string> = { day: "pd", week: "pw", month: "pm", year: "py" }
const SERPER_TBS: Record<TimeRange, string> = { day: "qdr:d", week: "qdr:w", month: "qdr:m", year: "qdr:y" }

const query = (params: Record<string, string | number | undefined>): string =>
  Object.entries(params)
    .filter((e): e is [string, string | number] => e[1] !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join("&")

/** The upstream call for one provider (`now` for Exa's start date). */
export const searchCall = (family: SearchFamily, ask: SearchAsk, now: number): CustomCall => {
  const domains = {
    ...(ask.includeDomains.length > 0 ? { include: ask.includeDomains } : {}),
    ...(ask.excludeDomains.length > 0 ? { exclude: ask.excludeDomains } : {})
  }
  switch (family) {
    case "tavily":
      return {
        path: "/search",
        method: "POST",
        json: {
          query: ask.query,
          max_results: ask.maxResults,
          search_depth: ask.searchDepth,
          topic: ask.topic ?? "general",
          ...(ask.timeRange ? { time_range: ask.timeRange } : {}),
          ...(domains.include ? { include_domains: domains.include } : {}),
          ...(domains.exclude ? { exclude_domains: domains.exclude } : {})
        }
      }
    case "brave":
      return {
        path: `/res/v1/web/search?${query({ q: ask.query, count: ask.maxResults, freshness: ask.timeRange ? BRAVE_FRESHNESS[ask.timeRange] : undefined })}`,
        method: "GET"
      }
    case "exa":
      return {
        path: "/search",
        method: "POST",
        json: {
          query: ask.query,
          numResults: ask.maxResults,
          ...(domains.include ? { includeDomains: domains.include } : {}),
          ...(domains.exclude ? { excludeDomains: domains.exclude } : {}),
          ...(ask.timeRange ? { startPublishedDate: new Date(now - RANGE_MS[ask.timeRange]).toISOString() } : {}),
          contents: { text: { maxCharacters: 1000 } }
        }
      }
    case "searxng":
      return { path: `/search?${query({ q: ask.query, format: "json", time_range: ask.timeRange })}`, method: "GET" }
    case "serper":
      return {
        path: "/search",
        method: "POST",
        json: { q: ask.query, num: ask.maxResults, ...(ask.timeRange ? { tbs: SERPER_TBS[ask.timeRange] } : {}) }
      }
  }
}

const isoDate = (v: unknown): string | null => {
  const s = str(v)
  if (!s) return null
  const t = Date.parse(s)
  return Number.isNaN(t) ? null : new Date(t).toISOString()
}

/** Snippets as plain text: Brave marks matches with `<strong>`, SearXNG may pass markup on; entities of the common five decoded. */
const plain = (v: unknown, max = 1000): string => {
  const s = (str(v) ?? "")
    .replace(/<[^>]*>/g, "")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .trim()
  return s.length > max ? s.slice(0, max) : s
}

const item = (title: unknown, url: unknown, snippet: unknown, published: unknown, score: unknown): SearchResult | undefined => {
  const u = str(url)
  if (!u || !/^https?:\/\//i.test(u)) return undefined
  return { title: plain(title, 500) || u, url: u, snippet: plain(snippet), published_at: isoDate(published), score: num(score) ?? null }
}

/** An upstream answer read into results; undefined when it is not the provider's shape (no result list at all). */
export const readSearch = (family: SearchFamily, json: unknown): Array<SearchResult> | undefined => {
  const b = obj(json)
  if (!b) return undefined
  const list = (key: string, from: Record<string, unknown> | undefined = b): ReadonlyArray<unknown> | undefined =>
    from && Array.isArray(from[key]) ? (from[key] as Array<unknown>) : undefined
  let rows: ReadonlyArray<SearchResult | undefined>
  switch (family) {
    case "tavily": {
      const l = list("results")
      if (!l) return undefined
      rows = l.map((r) => {
        const o = obj(r)
        return item(o?.["title"], o?.["url"], o?.["content"], o?.["published_date"], o?.["score"])
      })
      break
    }
    case "brave": {
      // A query with no web results may answer without a `web` section.
      const web = obj(b["web"])
      if (!web && b["type"] !== "search") return undefined
      rows = arr(web?.["results"]).map((r) => {
        const o = obj(r)
        return item(o?.["title"], o?.["url"], o?.["description"], o?.["page_age"], undefined)
      })
      break
    }
    case "exa": {
      const l = list("results")
      if (!l) return undefined
      rows = l.map((r) => {
        const o = obj(r)
        return item(o?.["title"], o?.["url"], o?.["text"] ?? arr(o?.["highlights"]).join(" "), o?.["publishedDate"], o?.["score"])
      })
      break
    }
    case "searxng": {
      const l = list("results")
      if (!l) return undefined
      rows = l.map((r) => {
        const o = obj(r)
        return item(o?.["title"], o?.["url"], o?.["content"], o?.["publishedDate"], o?.["score"])
      })
      break
    }
    case "serper": {
      const l = list("organic")
      if (!l) return undefined
      rows = l.map((r) => {
        const o = obj(r)
        return item(o?.["title"], o?.["link"], o?.["snippet"], o?.["date"], undefined)
      })
      break
    }
  }
  return rows.filter((r): r is SearchResult => r !== undefined)
}

const hostOf = (url: string): string | undefined => {
  try {
    return new URL(url).hostname.toLowerCase()
  } catch {
    return undefined
  }
}
const under = (host: string, domain: string): boolean => host === domain || host.endsWith("." + domain)

/** What the gateway enforces whatever the provider: the domain filters on the result URLs, then at most `max_results`. */
export const enforce = (ask: SearchAsk, results: ReadonlyArray<SearchResult>): Array<SearchResult> =>
  results
    .filter((r) => {
      const host = hostOf(r.url)
      if (!host) return false
      if (ask.includeDomains.length > 0 && !ask.includeDomains.some((d) => under(host, d))) return false
      return !ask.excludeDomains.some((d) => under(host, d))
    })
    .slice(0, ask.maxResults)
