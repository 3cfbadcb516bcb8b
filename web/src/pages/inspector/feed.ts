import { useEffect, useMemo, useRef, useState } from "preact/hooks"
import { BASE, type Summary } from "./api"

export type FeedState = "connecting" | "open" | "closed"
type FeedMessage =
  | { readonly type: "snapshot"; readonly entries: ReadonlyArray<Summary>; readonly bufferSize: number }
  | { readonly type: "new" | "update"; readonly entry: Summary }
  | { readonly type: "clear" }

/**
 * The inspector's WebSocket feed (same origin; the session cookie authenticates it as on the
 * management API): the buffer's entries, newest first, kept as the feed patches them. While it is
 * connected the gateway keeps bodies. Reconnects with a backoff; a reconnect's snapshot replaces all.
 */
export const useInspectorFeed = (): { entries: ReadonlyArray<Summary>; state: FeedState; bufferSize: number } => {
  const store = useRef(new Map<string, Summary>())
  const [version, setVersion] = useState(0)
  const [state, setState] = useState<FeedState>("connecting")
  const [bufferSize, setBufferSize] = useState(1000)
  useEffect(() => {
    let ws: WebSocket | undefined
    let stopped = false
    let retry = 1000
    let cap = 1000
    let timer: ReturnType<typeof setTimeout> | undefined
    const connect = () => {
      setState("connecting")
      ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${BASE}/ws`)
      ws.onopen = () => {
        retry = 1000
        setState("open")
      }
      ws.onmessage = (m) => {
        let msg: FeedMessage
        try {
          msg = JSON.parse(String(m.data))
        } catch {
          return
        }
        const map = store.current
        if (msg.type === "snapshot") {
          map.clear()
          for (const e of msg.entries) map.set(e.id, e)
          cap = msg.bufferSize
          setBufferSize(msg.bufferSize)
        } else if (msg.type === "new") {
          map.set(msg.entry.id, msg.entry)
          // The buffer drops its oldest entries without an event: so does the list.
          for (const id of map.keys()) {
            if (map.size <= cap) break
            map.delete(id)
          }
        } else if (msg.type === "update") {
          // An update of an entry no longer listed (cleared meanwhile) stays out.
          if (!map.has(msg.entry.id)) return
          map.set(msg.entry.id, msg.entry)
        } else if (msg.type === "clear") map.clear()
        else return
        setVersion((v) => v + 1)
      }
      ws.onclose = () => {
        if (stopped) return
        setState("closed")
        timer = setTimeout(connect, retry)
        retry = Math.min(retry * 2, 15000)
      }
    }
    connect()
    return () => {
      stopped = true
      if (timer) clearTimeout(timer)
      ws?.close()
    }
  }, [])
  const entries = useMemo(() => [...store.current.values()].reverse(), [version])
  return { entries, state, bufferSize }
}
