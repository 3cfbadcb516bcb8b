import WebSocket from "ws"

export type WsClient = {
  ws: WebSocket
  frames: Array<any>
  until: (type: string, count?: number) => Promise<any>
  send: (frame: unknown) => void
}

/**
 * A WebSocket client that collects the JSON messages it receives and can wait for the nth of a
 * type (5 s). A refused upgrade rejects with the status (`status` on the error).
 */
export const connectWs = (url: string, headers: Record<string, string>) =>
  new Promise<WsClient>((resolve, reject) => {
    const ws = new WebSocket(url, { headers })
    const frames: Array<any> = []
    const waiters: Array<() => void> = []
    ws.on("message", (data) => {
      frames.push(JSON.parse(String(data)))
      for (const w of waiters.splice(0)) w()
    })
    ws.once("unexpected-response", (_req, res) =>
      reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode }))
    )
    ws.once("error", reject)
    ws.once("open", () =>
      resolve({
        ws,
        frames,
        send: (frame) => ws.send(JSON.stringify(frame)),
        until: (type, count = 1) =>
          new Promise((done, fail) => {
            const check = () => {
              const hits = frames.filter((f) => f.type === type)
              if (hits.length >= count) return done(hits[count - 1])
              waiters.push(check)
            }
            setTimeout(() => fail(new Error(`no ${type} message; got ${frames.map((f) => f.type).join(", ")}`)), 5000).unref()
            check()
          })
      })
    )
  })
