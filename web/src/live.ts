import { useEffect, useState } from "preact/hooks"

/**
 * The live feed (docs/dashboard.md, "Live feed"): a WebSocket on the gateway's own port at
 * /api/live/ws (and on GATEWAY_LIVE_WS_PORT, 20129 by default). The server sends
 * `{ type: "hello", recent: [...] }` once, then `{ type: "event", event: {...} }` per event
 * (the event bus's `{ event, timestamp, data }`: request.completed, request.failed,
 * provider.error, provider.recovered, quota.exceeded, combo.switched, guardrail.action).
 */
export interface LiveEvent {
  readonly event: string
  readonly timestamp: string
  readonly data: Readonly<Record<string, unknown>>
}

export type LiveState = "connecting" | "open" | "closed" | "off"

const MAX = 200

/** The stop of every feed open on this page: a logout ends them before the session does, so none reconnects without one. */
const feeds = new Set<() => void>()
export const stopLiveFeeds = (): void => {
  for (const stop of [...feeds]) stop()
}

export const useLiveFeed = (): { events: ReadonlyArray<LiveEvent>; state: LiveState; detail: string | undefined } => {
  const [events, setEvents] = useState<ReadonlyArray<LiveEvent>>([])
  const [state, setState] = useState<LiveState>("connecting")
  const [detail, setDetail] = useState<string | undefined>()
  useEffect(() => {
    let ws: WebSocket | undefined
    let stopped = false
    let retry = 1000
    let timer: ReturnType<typeof setTimeout> | undefined
    const connect = () => {
      setState("connecting")
      ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/live/ws`)
      ws.onopen = () => {
        retry = 1000
        setState("open")
      }
      ws.onmessage = (m) => {
        let msg: { type?: string; recent?: LiveEvent[]; event?: LiveEvent; message?: string }
        try {
          msg = JSON.parse(String(m.data))
        } catch {
          return
        }
        if (msg.type === "hello" && msg.recent) setEvents(msg.recent.slice(-MAX).reverse())
        else if (msg.type === "event" && msg.event) setEvents((list) => [msg.event!, ...list].slice(0, MAX))
        else if (msg.type === "off") {
          stopped = true
          setState("off")
          setDetail(msg.message)
        }
      }
      ws.onclose = (e) => {
        if (stopped) return
        if (e.code === 4403 || e.code === 1008) {
          setState("off")
          setDetail(e.reason || "the live feed is switched off (GATEWAY_ENABLE_LIVE_WS=false)")
          return
        }
        setState("closed")
        timer = setTimeout(connect, retry)
        retry = Math.min(retry * 2, 15000)
      }
    }
    const stop = () => {
      stopped = true
      if (timer) clearTimeout(timer)
      ws?.close()
      feeds.delete(stop)
    }
    feeds.add(stop)
    connect()
    return stop
  }, [])
  return { events, state, detail }
}
