import type { Source, Summary } from "./api"

// What the list shows: the same filters narrow the live feed here (`matches`) and a session's
// entries and the HAR export on the server (`queryOf`).

export const SOURCES: ReadonlyArray<Source> = ["agent-bridge", "custom-host", "http-proxy", "system-proxy", "tproxy", "mcp"]
const STATUSES = ["", "in-flight", "ok", "failed", "2xx", "4xx", "5xx"] as const
export type StatusFilter = (typeof STATUSES)[number]

export interface Filters {
  readonly llmOnly: boolean
  readonly source: Source | ""
  readonly status: StatusFilter
  readonly host: string
  readonly agent: string
}
export const NO_FILTERS: Filters = { llmOnly: false, source: "", status: "", host: "", agent: "" }

/** The list's query (and the HAR export's): the server filters with the same rules as `matches`. */
export const queryOf = (f: Filters, sessionId?: string): Record<string, string> => ({
  ...(f.llmOnly ? { profile: "llm" } : {}),
  ...(f.source ? { source: f.source } : {}),
  ...(f.status ? { status: f.status } : {}),
  ...(f.host.trim() ? { host: f.host.trim().toLowerCase() } : {}),
  ...(f.agent.trim() ? { agent: f.agent.trim() } : {}),
  ...(sessionId ? { sessionId } : {})
})

const statusMatches = (status: Summary["status"], want: StatusFilter): boolean => {
  if (want === "") return true
  if (want === "in-flight") return status === "in-flight"
  if (want === "ok") return typeof status === "number" && status < 400
  if (want === "failed") return status === "error" || (typeof status === "number" && status >= 400)
  return typeof status === "number" && Math.floor(status / 100) === Number(want[0])
}

/** The live list's filter: the rules of the server's (src/services/inspector/Inspector.ts, `matches`). */
export const matches = (e: Summary, f: Filters): boolean => {
  const host = f.host.trim().toLowerCase()
  const agent = f.agent.trim()
  return (
    (!f.llmOnly || e.detectedKind === "llm" || e.llm !== null) &&
    (host === "" || e.host === host || e.host.endsWith(`.${host}`)) &&
    (agent === "" || e.agent === agent) &&
    statusMatches(e.status, f.status) &&
    (f.source === "" || e.source === f.source)
  )
}
