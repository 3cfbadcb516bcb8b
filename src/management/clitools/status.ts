import type { ToolConfigStatus, ToolDetection, ToolStatus } from "../../domain/clitools.js"
import { sanitise } from "./detect.js"
import type { ToolState } from "./plan.js"

/**
 * A tool's status from its detection and the state of its files. `configured`: the files point
 * at this gateway (the address the caller used, or any loopback name on the same port);
 * `other`: at some other base URL; `not_configured`: no gateway setting; `not_installed`: no
 * executable and no files; `unknown`: a file that does not parse, or a tool whose
 * configuration lives outside files the gateway reads (guide and MITM tools).
 */

const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[?::1\]?|0\.0\.0\.0|\[?::\]?)$/i

const portOf = (u: URL): string => u.port || (u.protocol === "https:" ? "443" : "80")

/** Whether `endpoint` reaches the gateway that was called as `host` (the request's Host header). */
export const pointsHere = (endpoint: string, host: string | undefined): boolean => {
  if (!host) return false
  try {
    const there = new URL(endpoint)
    const here = new URL(`${there.protocol}//${host}`)
    if (portOf(there) !== portOf(here)) return false
    const a = there.hostname.toLowerCase()
    const b = here.hostname.toLowerCase()
    return a === b || (LOOPBACK.test(a) && LOOPBACK.test(b))
  } catch {
    return false
  }
}

export type Observed = { readonly state: ToolState } | { readonly error: string }

export const toolStatus = (
  hasModule: boolean,
  detection: ToolDetection,
  observed: Observed | undefined,
  host: string | undefined
): ToolStatus => {
  const config = ((): ToolConfigStatus => {
    if (observed === undefined || !hasModule) return { status: detection.installed ? "unknown" : "not_installed" }
    if ("error" in observed) return { status: "unknown" }
    const { settings, exists, mtimes } = observed.state
    if (settings.baseUrl === null) return { status: !detection.installed && !exists ? "not_installed" : "not_configured" }
    const newest = Math.max(...mtimes.map(([, t]) => t))
    return {
      status: pointsHere(settings.baseUrl, host) ? "configured" : "other",
      endpoint: settings.baseUrl,
      ...(Number.isFinite(newest) ? { lastConfiguredAt: new Date(newest).toISOString() } : {})
    }
  })()
  const error = observed !== undefined && "error" in observed ? sanitise(observed.error) : undefined
  return { detection, config, ...(error ? { error } : {}) }
}
