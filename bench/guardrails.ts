/**
 * What the guardrails cost (docs/guardrails.md, "Cost"): the real gateway in-process against a
 * raw node:http mock on 127.0.0.1, the same requests with the guardrails off, with the default
 * (input sanitizer only) and with everything on; ratios against "off" measured in the same run.
 * Also the added delay of response sanitization on a paced stream (time to the first text).
 *
 *   npx vite-node bench/guardrails.ts            (REQUESTS=2000 STREAMS=200 to change the load)
 */
import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FeatureFlags } from "../src/platform/flags/FeatureFlags.js"
import { call, startGateway } from "../test/support/gateway.js"

const REQUESTS = Number(process.env["REQUESTS"] ?? 2000)
const STREAMS = Number(process.env["STREAMS"] ?? 200)
const CONCURRENCY = 8
const TEXT = "Sure. Here is the summary you asked for, with the contact bob@corp.example kept as written. ".repeat(10)

const chunk = (content: string, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m1", choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`

const mock = http.createServer((req, res) => {
  let body = ""
  req.on("data", (c) => (body += c))
  req.on("end", () => {
    const json = JSON.parse(body)
    if (!json.stream) {
      const answer = JSON.stringify({
        id: "c1",
        object: "chat.completion",
        created: 1,
        model: "m1",
        choices: [{ index: 0, message: { role: "assistant", content: TEXT }, finish_reason: "stop" }],
        usage: { prompt_tokens: 10, completion_tokens: 200, total_tokens: 210 }
      })
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) })
      return res.end(answer)
    }
    res.writeHead(200, { "content-type": "text/event-stream" })
    const pieces = TEXT.match(/.{1,16}/gs) ?? []
    const paced = body.includes("PACED")
    let i = 0
    const next = () => {
      if (i < pieces.length) {
        res.write(chunk(pieces[i++]!))
        if (paced) setTimeout(next, 10)
        else next()
      } else res.end(chunk("", "stop") + "data: [DONE]\n\n")
    }
    next()
  })
})

const ADMIN = "gwk_bench_guardrails_admin_0123456789ab"

const main = async () => {
  await new Promise<void>((r) => mock.listen(0, "127.0.0.1", r))
  const upstream = `http://127.0.0.1:${(mock.address() as AddressInfo).port}/v1`
  const gw = await startGateway({ env: { LOG_LEVEL: "warning" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: "mock", baseUrl: upstream, defaultModel: "m1" },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  const setFlags = (v: Record<string, string | undefined>) =>
    gw.run(
      Effect.gen(function* () {
        const f = yield* FeatureFlags
        for (const [k, value] of Object.entries(v)) yield* Effect.orDie(f.set(k, value))
      })
    )
  const USER = "Summarise the thread from alice@example.com (card 4111 1111 1111 1111) and answer politely. ".repeat(20)
  const ask = (stream: boolean, pace = false) =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "mock/m1",
        stream,
        messages: [
          { role: "system", content: "be brief" },
          { role: "user", content: pace ? `${USER} PACED` : USER }
        ]
      })
    })
  const load = async (n: number, stream: boolean) => {
    let left = n
    const started = performance.now()
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (left-- > 0) {
          const res = await ask(stream)
          await res.text()
        }
      })
    )
    return n / ((performance.now() - started) / 1000)
  }
  /** Milliseconds to the first text of a paced stream (16-character chunks every 10 ms), and to its end. */
  const paced = async () => {
    const t0 = performance.now()
    const res = await ask(true, true)
    const reader = res.body!.getReader()
    let first = -1
    let all = ""
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      all += new TextDecoder().decode(value)
      if (first < 0 && /"content":"[^"]/.test(all)) first = performance.now() - t0
    }
    return { first, total: performance.now() - t0 }
  }
  const CONFIGS: ReadonlyArray<[string, Record<string, string | undefined>]> = [
    [
      "off",
      { INPUT_SANITIZER_ENABLED: "false", INJECTION_GUARD_MODE: "off", PII_REDACTION_ENABLED: "false", PII_RESPONSE_SANITIZATION: "false" }
    ],
    ["default (sanitizer)", { INPUT_SANITIZER_ENABLED: undefined }],
    [
      "all on (redact)",
      {
        INPUT_SANITIZER_ENABLED: "true",
        INJECTION_GUARD_MODE: "redact",
        PII_REDACTION_ENABLED: "true",
        PII_RESPONSE_SANITIZATION: "true",
        PII_RESPONSE_SANITIZATION_MODE: "redact"
      }
    ]
  ]
  const rows: Array<Array<string>> = []
  let base: { json: number; sse: number } | undefined
  // Warm-up of the whole path (JIT) before anything is measured.
  await load(1000, false)
  await load(200, true)
  for (const [name, flags] of CONFIGS) {
    await setFlags(flags)
    await load(200, false) // warm-up
    const json = await load(REQUESTS, false)
    const sse = await load(STREAMS, true)
    const p = [await paced(), await paced(), await paced()].sort((a, b) => a.first - b.first)[1]!
    base ??= { json, sse }
    rows.push([
      name,
      json.toFixed(0),
      (json / base.json).toFixed(3),
      sse.toFixed(0),
      (sse / base.sse).toFixed(3),
      p.first.toFixed(1),
      p.total.toFixed(1)
    ])
  }
  console.log("| guardrails | JSON req/s | ratio | SSE streams/s (57 chunks) | ratio | paced stream: first text ms | end ms |")
  console.log("|---|---|---|---|---|---|---|")
  for (const r of rows) console.log(`| ${r.join(" | ")} |`)
  await gw.close()
  mock.close()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
