/**
 * Calls per minute per key and server (the server's `rpm`, docs/mcp.md): a fixed one-minute
 * window per pair, in this process (under `--workers N` each worker counts its own).
 */
import type { McpServerRecord } from "../../domain/mcpServers.js"

const WINDOW_MS = 60_000

export const makeRateLimiter = (now: () => number = Date.now) => {
  const windows = new Map<string, { start: number; count: number }>()
  let lastSweep = 0
  /** Counts a call; the seconds until the window ends when the key is over the server's limit (the call is not counted then). */
  const take = (keyId: string, server: McpServerRecord): number | undefined => {
    if (server.rpm === null) return undefined
    const t = now()
    if (t - lastSweep > WINDOW_MS) {
      lastSweep = t
      for (const [k, w] of windows) if (t - w.start >= WINDOW_MS) windows.delete(k)
    }
    const id = `${keyId}\u0000${server.name}`
    let w = windows.get(id)
    if (w === undefined || t - w.start >= WINDOW_MS) {
      w = { start: t, count: 0 }
      windows.set(id, w)
    }
    if (w.count >= server.rpm) return Math.max(1, Math.ceil((w.start + WINDOW_MS - t) / 1000))
    w.count += 1
    return undefined
  }
  return { take }
}
