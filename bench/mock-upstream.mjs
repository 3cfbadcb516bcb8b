#!/usr/bin/env node
// Mock OpenAI-compatible upstream for the benchmark: raw node:http, every answer precomputed.
//
// The model name (or the `x-mock-mode` header, which wins) picks the behaviour:
//   json-1k, json-10k   chat completion of ~1 KB / ~10 KB, answered at once
//   delay-20            json-1k after 20 ms
//   sse-paced           SSE: 64 content chunks, one every 20 ms, then a usage chunk and [DONE]
//   sse-burst           the same 64 chunks + usage + [DONE] written at once
//   fail-500, fail-429, fail-503   an OpenAI-style error with that status
// `POST /v1/messages` (Anthropic) and `POST /v1beta/models/{m}:streamGenerateContent` (Gemini) answer
// the sse-burst chunks in their own stream formats, whatever the model.
// A `stream: true` request for a json-* or delay-20 model is answered like sse-burst, with the
// same text and usage as its whole answer (the gateway asks upstreams for streams); an unknown model is
// answered like json-1k. GET /v1/models lists the modes. Listens on 127.0.0.1 (port 0 unless
// --port) and prints `listening <port>` once ready.
import * as http from "node:http"

const portArg = process.argv.indexOf("--port")
const PORT = portArg > 0 ? Number(process.argv[portArg + 1]) : 0
const CHUNKS = 64
const PACE_MS = 20
const CREATED = 1_767_225_600

const usage = (prompt, completion) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
  prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
  completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 }
})

const WORDS = "the quick brown fox jumps over a lazy dog while benchmarks measure how little a gateway adds ".split(" ").filter(Boolean)
const text = (bytes) => {
  let s = ""
  for (let i = 0; s.length < bytes; i++) s += (i ? " " : "") + WORDS[i % WORDS.length]
  return s.slice(0, bytes)
}

/** A chat completion whose serialised size is as close to `target` bytes as the filler allows. */
const completion = (model, target) => {
  const make = (n) =>
    JSON.stringify({
      id: "chatcmpl-bench0000000000000000000000",
      object: "chat.completion",
      created: CREATED,
      model,
      system_fingerprint: "fp_bench",
      choices: [{ index: 0, message: { role: "assistant", content: text(n), refusal: null }, logprobs: null, finish_reason: "stop" }],
      usage: usage(42, Math.max(1, Math.round(n / 4))),
      service_tier: "default"
    })
  const overhead = Buffer.byteLength(make(0))
  return Buffer.from(make(Math.max(0, target - overhead)))
}

const chunk = (model, delta, finish) =>
  `data: ${JSON.stringify({
    id: "chatcmpl-bench0000000000000000000000",
    object: "chat.completion.chunk",
    created: CREATED,
    model,
    system_fingerprint: "fp_bench",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }]
  })}\n\n`

/**
 * 64 content chunks (the first also carries the role, the last the finish), usage, [DONE]. With
 * `whole` (a completion of completion()), the chunks carry its text and its usage: what the same
 * upstream streams when the request says `stream: true`, so an answer the gateway collects from
 * a stream is the answer it would have got whole.
 */
const sseParts = (model, whole) => {
  const parts = []
  const content = whole ? JSON.parse(whole.toString()).choices[0].message.content : undefined
  const piece = content === undefined ? 0 : Math.ceil(content.length / CHUNKS)
  for (let i = 0; i < CHUNKS; i++) {
    const text = content === undefined ? (i === 0 ? "tok0" : ` tok${i}`) : content.slice(i * piece, (i + 1) * piece)
    const delta = i === 0 ? { role: "assistant", content: text } : { content: text }
    parts.push(Buffer.from(chunk(model, delta, i === CHUNKS - 1 ? "stop" : null)))
  }
  const tail = `data: ${JSON.stringify({
    id: "chatcmpl-bench0000000000000000000000",
    object: "chat.completion.chunk",
    created: CREATED,
    model,
    system_fingerprint: "fp_bench",
    choices: [],
    usage: whole ? JSON.parse(whole.toString()).usage : usage(42, CHUNKS)
  })}\n\ndata: [DONE]\n\n`
  parts.push(Buffer.from(tail))
  return parts
}

const JSON_HEADERS = (len) => ({
  "content-type": "application/json",
  "content-length": len,
  "x-request-id": "req_bench",
  "openai-processing-ms": "1"
})
const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-request-id": "req_bench" }

const errorBody = (status) => {
  const [type, code, message] =
    status === 429
      ? ["rate_limit_error", "rate_limit_exceeded", "Rate limit reached for requests (mock). Please try again in 1s."]
      : status === 503
        ? ["server_error", "overloaded", "The server is overloaded (mock)."]
        : ["server_error", "internal_error", "The server had an error while processing your request (mock)."]
  return Buffer.from(JSON.stringify({ error: { message, type, param: null, code } }))
}

/**
 * The same 64-chunk burst in the other upstream families' stream formats, for the translated
 * rows of the bench (a client in one format, this upstream in another): Anthropic Messages
 * (`POST /v1/messages`, named events, usage in message_start and message_delta) and Gemini
 * (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`, usageMetadata on the last chunk).
 */
const messagesBurst = (model) => {
  const ev = (name, data) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`
  let s = ev("message_start", {
    type: "message_start",
    message: {
      id: "msg_bench00000000000000000000",
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 42, output_tokens: 1 }
    }
  })
  s += ev("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } })
  s += ev("ping", { type: "ping" })
  for (let i = 0; i < CHUNKS; i++)
    s += ev("content_block_delta", {
      type: "content_block_delta",
      index: 0,
      delta: { type: "text_delta", text: i === 0 ? "tok0" : ` tok${i}` }
    })
  s += ev("content_block_stop", { type: "content_block_stop", index: 0 })
  s += ev("message_delta", {
    type: "message_delta",
    delta: { stop_reason: "end_turn", stop_sequence: null },
    usage: { output_tokens: CHUNKS }
  })
  s += ev("message_stop", { type: "message_stop" })
  return Buffer.from(s)
}
const generateContentBurst = (model) => {
  let s = ""
  for (let i = 0; i < CHUNKS; i++) {
    const last = i === CHUNKS - 1
    const candidate = {
      content: { parts: [{ text: i === 0 ? "tok0" : ` tok${i}` }], role: "model" },
      index: 0,
      ...(last ? { finishReason: "STOP" } : {})
    }
    const usageMetadata = last
      ? { promptTokenCount: 42, candidatesTokenCount: CHUNKS, totalTokenCount: 42 + CHUNKS }
      : { promptTokenCount: 42, totalTokenCount: 42 }
    s += `data: ${JSON.stringify({ candidates: [candidate], usageMetadata, modelVersion: model, responseId: "bench00000000000000000000" })}\r\n\r\n`
  }
  return Buffer.from(s)
}
const MESSAGES_BURST = messagesBurst("sse-burst")
const GENERATE_CONTENT_BURST = generateContentBurst("sse-burst")

const J1 = completion("json-1k", 1024)
const J10 = completion("json-10k", 10 * 1024)
const JD = completion("delay-20", 1024)
const PACED = sseParts("sse-paced")
const BURST = Buffer.concat(sseParts("sse-burst"))
const JSON_BURST = {
  "json-1k": Buffer.concat(sseParts("json-1k", J1)),
  "json-10k": Buffer.concat(sseParts("json-10k", J10)),
  "delay-20": Buffer.concat(sseParts("delay-20", JD))
}
const ERRORS = { 500: errorBody(500), 429: errorBody(429), 503: errorBody(503) }
const MODELS = Buffer.from(
  JSON.stringify({
    object: "list",
    data: ["json-1k", "json-10k", "delay-20", "sse-paced", "sse-burst", "fail-500", "fail-429", "fail-503"].map((id) => ({
      id,
      object: "model",
      created: CREATED,
      owned_by: "bench"
    }))
  })
)

const sendJson = (res, status, body, extra) => {
  res.writeHead(status, extra ? { ...JSON_HEADERS(body.length), ...extra } : JSON_HEADERS(body.length))
  res.end(body)
}

// Paced streams share one list walked by timers of the same period; each stream keeps its own phase.
const paced = (res) => {
  res.writeHead(200, SSE_HEADERS)
  let i = 0
  res.write(PACED[i++])
  const timer = setInterval(() => {
    if (res.destroyed) return clearInterval(timer)
    if (i < CHUNKS) res.write(PACED[i++])
    if (i >= CHUNKS) {
      clearInterval(timer)
      res.end(PACED[CHUNKS])
    }
  }, PACE_MS)
  res.on("close", () => clearInterval(timer))
}

const modelOf = (body) => {
  // Cheap extraction: bodies are small JSON written by clients and gateways; fall back to parsing.
  const m = /"model"\s*:\s*"([^"]*)"/.exec(body)
  return m ? m[1] : ""
}

const handle = (req, res, body) => {
  // The other families (stream bursts only): see messagesBurst and generateContentBurst.
  if (req.url.startsWith("/v1/messages")) {
    res.writeHead(200, SSE_HEADERS)
    return res.end(MESSAGES_BURST)
  }
  if (req.url.includes(":streamGenerateContent")) {
    res.writeHead(200, SSE_HEADERS)
    return res.end(GENERATE_CONTENT_BURST)
  }
  const mode = req.headers["x-mock-mode"] || modelOf(body)
  const stream = /"stream"\s*:\s*true/.test(body)
  switch (mode) {
    case "fail-500":
      return sendJson(res, 500, ERRORS[500])
    case "fail-503":
      return sendJson(res, 503, ERRORS[503])
    case "fail-429":
      return sendJson(res, 429, ERRORS[429], { "retry-after": "1", "x-ratelimit-remaining-requests": "0" })
    case "sse-paced":
      return paced(res)
    case "sse-burst":
      res.writeHead(200, SSE_HEADERS)
      return res.end(BURST)
    case "delay-20":
      return void setTimeout(() => {
        if (!stream) return sendJson(res, 200, JD)
        res.writeHead(200, SSE_HEADERS)
        res.end(JSON_BURST["delay-20"])
      }, 20)
    case "json-10k":
      if (stream) {
        res.writeHead(200, SSE_HEADERS)
        return res.end(JSON_BURST["json-10k"])
      }
      return sendJson(res, 200, J10)
    default:
      if (stream) {
        res.writeHead(200, SSE_HEADERS)
        return res.end(JSON_BURST["json-1k"])
      }
      return sendJson(res, 200, J1)
  }
}

const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
  if (req.method === "GET") {
    if (req.url.endsWith("/models")) return sendJson(res, 200, MODELS)
    return sendJson(res, 200, Buffer.from('{"ok":true}'))
  }
  const parts = []
  req.on("data", (c) => parts.push(c))
  req.on("end", () => handle(req, res, parts.length === 1 ? parts[0].toString("latin1") : Buffer.concat(parts).toString("latin1")))
})
server.maxHeadersCount = 0
server.headersTimeout = 0
server.requestTimeout = 0
server.listen(PORT, "127.0.0.1", () => console.log(`listening ${server.address().port}`))
const stop = () => server.close(() => process.exit(0)) && server.closeAllConnections()
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
