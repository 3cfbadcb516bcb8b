#!/usr/bin/env node
// Compression's trade: tokens saved against answer quality, per engine, on an eval set of
// coding-agent turns (bench/compression-eval/turns.json: a tool output or a prose request from
// test/fixtures/compression, and the question the agent's user asked about it).
//
// Tokens: POST /api/compression/preview for each turn and engine (o200k), always measured.
// Quality (needs a real model, so never in the test suite): each turn is answered through a
// gateway without compression and with each engine (`x-gateway-compression`), and a judge model
// scores each compressed answer against the uncompressed one from 0 to 10 (same facts, nothing
// missing or wrong). Reported side by side with the tokens saved.
//
//   node bench/compression-quality.mjs                                   tokens only (a local gateway, no model)
//   node bench/compression-quality.mjs --url http://127.0.0.1:20128 --key <admin key> \
//        --model <provider/model> --judge <provider/model>               tokens and quality through that gateway
//
// A local gateway (no --url) listens on 127.0.0.1 only; with --url the calls go where it says.
import { readFileSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { cleanup } from "./lib/proc.mjs"
import { ADMIN_KEY, startGateway, startMock } from "./lib/targets.mjs"

const arg = (name) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1] : undefined
}
const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")
const fixtures = path.join(rootDir, "test/fixtures/compression")
const turns = JSON.parse(readFileSync(path.join(benchDir, "compression-eval/turns.json"), "utf8"))
const ENGINES = ["engine:rtk", "engine:json", "engine:whitespace", "engine:caveman", "default"]

/** The turn as a chat request: a tool call and its output, or a user's prose, then the question. */
const request = (turn, model) => {
  const text = readFileSync(path.join(fixtures, `${turn.fixture}.input.txt`), "utf8")
  let segment = {}
  try {
    segment = JSON.parse(readFileSync(path.join(fixtures, `${turn.fixture}.segment.json`), "utf8"))
  } catch {}
  const messages =
    turn.role === "user"
      ? [
          { role: "user", content: text },
          { role: "assistant", content: "Understood. Where should I start?" },
          { role: "user", content: turn.question }
        ]
      : [
          { role: "user", content: "Run it and tell me what you see." },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              {
                id: "call_1",
                type: "function",
                function: { name: segment.toolName ?? "bash", arguments: JSON.stringify({ command: segment.command ?? "run" }) }
              }
            ]
          },
          { role: "tool", tool_call_id: "call_1", content: text },
          { role: "user", content: turn.question }
        ]
  return { model, messages, max_tokens: 600 }
}

const main = async () => {
  let base = arg("url")
  let key = arg("key")
  const model = arg("model")
  const judge = arg("judge")
  if (!base) {
    const mock = await startMock({ benchDir })
    const t = await startGateway({ rootDir, mock })
    if (!t.ok) throw new Error(t.error)
    base = t.baseUrl
    key = ADMIN_KEY
  }
  const headers = { "content-type": "application/json", authorization: `Bearer ${key}` }
  const post = async (p, body, extra = {}) => {
    const res = await fetch(`${base}${p}`, { method: "POST", headers: { ...headers, ...extra }, body: JSON.stringify(body) })
    const json = await res.json().catch(() => undefined)
    if (res.status !== 200) throw new Error(`${p}: ${res.status} ${JSON.stringify(json)}`)
    return json
  }
  const answer = async (body, mode) =>
    (await post("/v1/chat/completions", body, { "x-gateway-compression": mode })).choices?.[0]?.message?.content ?? ""
  const rows = []
  for (const turn of turns) {
    const body = request(turn, model ?? "none/none")
    const baseline = model ? await answer(body, "off") : undefined
    for (const mode of ENGINES) {
      const p = await post("/api/compression/preview", { format: "openai-chat", body, mode })
      const row = { turn: turn.id, mode, tokensBefore: p.tokensBefore, tokensAfter: p.tokensAfter, score: undefined }
      if (model && judge && p.tokensAfter < p.tokensBefore) {
        const compressed = await answer(body, mode)
        const verdict = await answer(
          {
            model: judge,
            max_tokens: 8,
            messages: [
              {
                role: "user",
                content: `Two answers to the same question about the same material. Score the second from 0 to 10 for whether it states the same facts as the first, with nothing missing or wrong. Reply with the number only.\n\nQuestion: ${turn.question}\n\nFirst answer:\n${baseline}\n\nSecond answer:\n${compressed}`
              }
            ]
          },
          "off"
        )
        const n = Number(/\d+(\.\d+)?/.exec(verdict)?.[0])
        row.score = Number.isFinite(n) ? Math.min(10, Math.max(0, n)) : undefined
      } else if (model && judge) row.score = 10 // unchanged request: the same answer
      rows.push(row)
    }
  }
  console.log(`| turn | mode | tokens before | tokens after | saved | judge score (0-10) |`)
  console.log(`|---|---|---|---|---|---|`)
  for (const r of rows) {
    const saved = r.tokensBefore > 0 ? `${(((r.tokensBefore - r.tokensAfter) / r.tokensBefore) * 100).toFixed(1)}%` : "-"
    console.log(
      `| ${r.turn} | ${r.mode} | ${r.tokensBefore} | ${r.tokensAfter} | ${saved} | ${r.score ?? "not measured (no --model/--judge)"} |`
    )
  }
  console.log(`\n| mode | tokens before | tokens after | saved | mean judge score |`)
  console.log(`|---|---|---|---|---|`)
  for (const mode of ENGINES) {
    const xs = rows.filter((r) => r.mode === mode)
    const b = xs.reduce((s, r) => s + r.tokensBefore, 0)
    const a = xs.reduce((s, r) => s + r.tokensAfter, 0)
    const scored = xs.filter((r) => r.score !== undefined)
    const score = scored.length ? (scored.reduce((s, r) => s + r.score, 0) / scored.length).toFixed(1) : "not measured"
    console.log(`| ${mode} | ${b} | ${a} | ${(((b - a) / b) * 100).toFixed(1)}% | ${score} |`)
  }
}

try {
  await main()
} finally {
  await cleanup()
}
