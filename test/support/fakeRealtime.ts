import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type WebSocket from "ws"
import { WebSocketServer } from "ws"

/**
 * A realtime upstream on 127.0.0.1 speaking OpenAI's realtime event protocol (GA), with the `ws`
 * package: `session.created` on connect, `session.update` → `session.updated`,
 * `conversation.item.create` → `conversation.item.added`/`done`, and `response.create` → a
 * response whose content depends on the conversation: text deltas, audio deltas (base64) when
 * the session's output modalities include audio, or a function call when tools are set and the
 * last user text asks for the weather; `response.done` carries usage. `beta`: the server also
 * takes `OpenAI-Beta: realtime=v1` (answering the beta's session shape); without it such a
 * handshake is refused with 400, as a GA-only server does.
 */
export interface FakeRealtimeOptions {
  readonly beta?: boolean
  /** Refuse every handshake with this status. */
  readonly refuse?: number
}

export interface FakeRealtime {
  readonly port: number
  /** The base URL a connection is configured with (`http://127.0.0.1:<port>/v1`). */
  readonly baseUrl: string
  /** Handshakes seen: their URL and headers. */
  readonly handshakes: Array<{ readonly url: string; readonly headers: http.IncomingHttpHeaders }>
  /** Client events received, per connection in order. */
  readonly received: Array<any>
  /** Open server-side sockets. */
  readonly sockets: Set<WebSocket>
  /** Usage reported by each response.done (the next one uses this). */
  usage: Record<string, unknown>
  readonly close: () => Promise<void>
}

export const DEFAULT_USAGE = {
  total_tokens: 350,
  input_tokens: 200,
  output_tokens: 150,
  input_token_details: {
    text_tokens: 120,
    audio_tokens: 80,
    image_tokens: 0,
    cached_tokens: 40,
    cached_tokens_details: { text_tokens: 40, audio_tokens: 0, image_tokens: 0 }
  },
  output_token_details: { text_tokens: 50, audio_tokens: 100 }
}

let counter = 0
const id = (prefix: string) => `${prefix}_${(++counter).toString(36).padStart(6, "0")}`

export const startFakeRealtime = async (options: FakeRealtimeOptions = {}): Promise<FakeRealtime> => {
  const handshakes: FakeRealtime["handshakes"] = []
  const received: Array<any> = []
  const sockets = new Set<WebSocket>()
  const server = http.createServer((_req, res) => {
    res.statusCode = 404
    res.end()
  })
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (p) => (p.has("realtime") ? "realtime" : false) })
  const state: { usage: Record<string, unknown> } = { usage: DEFAULT_USAGE }
  server.on("upgrade", (req, socket, head) => {
    handshakes.push({ url: req.url ?? "", headers: req.headers })
    const beta = String(req.headers["openai-beta"] ?? "").includes("realtime=v1")
    const refuse = options.refuse ?? (beta && !options.beta ? 400 : undefined)
    // OpenAI's path (`/v1/realtime`) under any prefix: Azure OpenAI's is `/openai/v1/realtime`.
    if (refuse !== undefined || !new URL(req.url ?? "/", "http://x").pathname.endsWith("/v1/realtime")) {
      const body = JSON.stringify({ error: { message: refuse === 400 ? "beta realtime is not supported" : "refused", code: "refused" } })
      socket.end(
        `HTTP/1.1 ${refuse ?? 404} Refused\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
      )
      return
    }
    const model = new URL(req.url ?? "/", "http://x").searchParams.get("model") ?? "unknown"
    wss.handleUpgrade(req, socket, head, (ws) => serve(ws, model, beta))
  })

  const serve = (ws: WebSocket, model: string, beta: boolean) => {
    sockets.add(ws)
    ws.on("close", () => sockets.delete(ws))
    const send = (e: Record<string, unknown>) => ws.send(JSON.stringify({ event_id: id("event"), ...e }))
    const session: Record<string, any> = beta
      ? { id: id("sess"), object: "realtime.session", model, modalities: ["text", "audio"] }
      : { id: id("sess"), object: "realtime.session", type: "realtime", model, output_modalities: ["text"], tools: [] }
    const items: Array<any> = []
    send({ type: "session.created", session })
    ws.on("message", (data) => {
      const event = JSON.parse(String(data))
      received.push(event)
      switch (event.type) {
        case "session.update": {
          Object.assign(session, event.session ?? {})
          send({ type: "session.updated", session })
          break
        }
        case "conversation.item.create": {
          const item = { id: event.item?.id ?? id("item"), ...event.item, status: "completed" }
          items.push(item)
          send({ type: "conversation.item.added", previous_item_id: null, item })
          send({ type: "conversation.item.done", previous_item_id: null, item })
          break
        }
        case "input_audio_buffer.append": {
          break
        }
        // Not of the protocol: `count` events of `bytes` each, as fast as the socket takes them (backpressure tests).
        case "test.flood": {
          const filler = "x".repeat(event.bytes ?? 1024 * 1024)
          for (let i = 0; i < (event.count ?? 1); i++) send({ type: "test.flooded", n: i, filler })
          break
        }
        case "response.create": {
          respond()
          break
        }
        default:
          break
      }
    })

    const respond = () => {
      const responseId = id("resp")
      const last = [...items].reverse().find((i) => i.role === "user")
      const text: string = last?.content?.find((c: any) => typeof c.text === "string")?.text ?? ""
      const lastOutput = items[items.length - 1]
      const audio = (session.output_modalities ?? session.modalities ?? []).includes("audio")
      send({ type: "response.created", response: { id: responseId, object: "realtime.response", status: "in_progress", output: [] } })
      const output: Array<any> = []
      if ((session.tools ?? []).length > 0 && /weather/i.test(text) && lastOutput?.type !== "function_call_output") {
        const item = {
          id: id("item"),
          type: "function_call",
          status: "completed",
          name: session.tools[0].name,
          call_id: id("call"),
          arguments: JSON.stringify({ city: "Paris" })
        }
        send({ type: "response.output_item.added", response_id: responseId, output_index: 0, item: { ...item, arguments: "" } })
        send({
          type: "response.function_call_arguments.delta",
          response_id: responseId,
          item_id: item.id,
          output_index: 0,
          call_id: item.call_id,
          delta: item.arguments
        })
        send({
          type: "response.function_call_arguments.done",
          response_id: responseId,
          item_id: item.id,
          output_index: 0,
          call_id: item.call_id,
          name: item.name,
          arguments: item.arguments
        })
        send({ type: "response.output_item.done", response_id: responseId, output_index: 0, item })
        output.push(item)
        items.push(item)
      } else {
        const answer = lastOutput?.type === "function_call_output" ? `The weather: ${lastOutput.output}` : `You said: ${text || "(audio)"}`
        const itemId = id("item")
        const base = { response_id: responseId, item_id: itemId, output_index: 0, content_index: 0 }
        send({
          type: "response.output_item.added",
          response_id: responseId,
          output_index: 0,
          item: { id: itemId, type: "message", role: "assistant", content: [] }
        })
        if (audio) {
          const pcm = Buffer.alloc(4800, 7)
          for (let i = 0; i < 3; i++) send({ type: "response.output_audio.delta", ...base, delta: pcm.toString("base64") })
          send({ type: "response.output_audio.done", ...base })
          send({ type: "response.output_audio_transcript.delta", ...base, delta: answer })
          send({ type: "response.output_audio_transcript.done", ...base, transcript: answer })
        } else {
          for (const piece of answer.match(/.{1,5}/g) ?? []) send({ type: "response.output_text.delta", ...base, delta: piece })
          send({ type: "response.output_text.done", ...base, text: answer })
        }
        const item = {
          id: itemId,
          type: "message",
          role: "assistant",
          status: "completed",
          content: [audio ? { type: "output_audio", transcript: answer } : { type: "output_text", text: answer }]
        }
        send({ type: "response.output_item.done", response_id: responseId, output_index: 0, item })
        output.push(item)
        items.push(item)
      }
      send({
        type: "response.done",
        response: { id: responseId, object: "realtime.response", status: "completed", output, usage: state.usage }
      })
    }
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  const fake: FakeRealtime = {
    port,
    baseUrl: `http://127.0.0.1:${port}/v1`,
    handshakes,
    received,
    sockets,
    get usage() {
      return state.usage
    },
    set usage(u) {
      state.usage = u
    },
    close: async () => {
      for (const s of sockets) s.terminate()
      wss.close()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
  return fake
}
