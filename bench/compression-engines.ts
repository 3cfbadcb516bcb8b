/**
 * Token savings of the caveman, whitespace and json engines on their test corpus
 * (test/fixtures/compression/<engine>/), counted with the o200k tokenizer (src/upstream/formats/tokens.ts'
 * counter). Not timed.
 *
 *   npx vite-node bench/compression-engines.ts            (--write: write missing expected outputs, to review by eye)
 */
import * as fs from "node:fs"
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"
import * as caveman from "../src/services/context/engines/caveman.js"
import * as json from "../src/services/context/engines/json.js"
import * as whitespace from "../src/services/context/engines/whitespace.js"
import * as Schema from "effect/Schema"
import { loadCorpus, noRaw, runCase } from "../test/support/compressionCorpus.js"

const prose = { role: "user", kind: "prose", turn: 0, turns: 2 } as const
const tool = { role: "tool", kind: "tool-result", turn: 1, turns: 3 } as const
const engines = [
  { id: "caveman", engine: caveman.caveman, config: caveman.Config, segment: prose },
  { id: "whitespace", engine: whitespace.whitespace, config: whitespace.Config, segment: prose },
  { id: "json", engine: json.json, config: json.Config, segment: tool }
] as const

const write = process.argv.includes("--write")
for (const e of engines) {
  let before = 0
  let after = 0
  for (const c of loadCorpus(e.id, e.segment)) {
    const out = runCase(e.engine as never, e.config as never, c)
    if (write && c.expected === undefined) fs.writeFileSync(c.expectedPath, out)
    const b = countTokens(c.input)
    const a = countTokens(out)
    before += b
    after += a
    console.log(
      `${e.id.padEnd(10)} ${c.name.padEnd(28)} ${String(b).padStart(5)} → ${String(a).padStart(5)}  ${(((b - a) / b) * 100).toFixed(1)}%`
    )
  }
  console.log(
    `${e.id.padEnd(10)} ${"TOTAL".padEnd(28)} ${String(before).padStart(5)} → ${String(after).padStart(5)}  ${(((before - after) / before) * 100).toFixed(1)}%\n`
  )
}

// ---------------------------------------------------------------------------------------------
// The recorded coding-agent traffic (../shared/fixtures/clients/cli/*.jsonl): every distinct text
// of every request, as a segment, through each engine with its default config.

type Seg = { role: "system" | "user" | "assistant" | "tool"; kind: "prose" | "tool-result"; turn: number; turns: number }
// ../shared from the main checkout, ../../shared from a worktree under /work/wt; FIXTURES= to point elsewhere.
const FIXTURES =
  process.env["FIXTURES"] ??
  ["../shared/fixtures/clients/cli/", "../../shared/fixtures/clients/cli/"]
    .map((p) => `${process.cwd()}/${p}`)
    .find((p) => fs.existsSync(p)) ??
  ""
const texts = new Map<string, { text: string; segment: Seg }>()
const add = (text: unknown, segment: Seg) => {
  if (typeof text === "string" && text.length > 0)
    texts.set(`${segment.kind}/${segment.role}/${segment.turn === segment.turns - 1}/${text}`, { text, segment })
}
const partsText = (content: unknown, segment: Seg) => {
  if (typeof content === "string") return add(content, segment)
  if (!Array.isArray(content)) return
  for (const p of content as Array<Record<string, unknown>>) {
    if (typeof p.text === "string") add(p.text, segment)
    if (p.type === "tool_result") partsText(p.content, { ...segment, role: "tool", kind: "tool-result" })
  }
}
if (FIXTURES && fs.existsSync(FIXTURES)) {
  for (const file of fs.readdirSync(FIXTURES).filter((f) => f.endsWith(".jsonl"))) {
    for (const line of fs.readFileSync(`${FIXTURES}/${file}`, "utf8").split("\n")) {
      if (!line.trim()) continue
      const body = JSON.parse(line).body as Record<string, any> | undefined
      if (!body || typeof body !== "object") continue
      const messages: Array<any> = body.messages ?? body.input ?? body.contents ?? []
      const turns = Array.isArray(messages) ? messages.length : 1
      partsText(body.system, { role: "system", kind: "prose", turn: 0, turns: turns + 1 })
      add(body.instructions, { role: "system", kind: "prose", turn: 0, turns: turns + 1 })
      if (body.systemInstruction) partsText(body.systemInstruction.parts, { role: "system", kind: "prose", turn: 0, turns: turns + 1 })
      if (!Array.isArray(messages)) continue
      messages.forEach((m, turn) => {
        const role = m.role === "model" ? "assistant" : m.role === "developer" ? "system" : m.role
        if (m.type === "function_call_output") return add(m.output, { role: "tool", kind: "tool-result", turn, turns })
        if (role === "tool") return partsText(m.content, { role: "tool", kind: "tool-result", turn, turns })
        if (!["system", "user", "assistant"].includes(role)) return
        partsText(m.content ?? m.parts, { role, kind: "prose", turn, turns })
      })
    }
  }
  console.log(`recorded traffic: ${texts.size} distinct texts`)
  const runs = [
    ...engines.map((e) => ({ ...e, label: e.id, raw: {} })),
    ...(["lite", "ultra"] as const).map((level) => ({ ...engines[0], label: `caveman/${level}`, raw: { level } }))
  ]
  for (const e of runs) {
    const cfg = (Schema.decodeUnknownSync as any)(e.config)(e.raw)
    let before = 0
    let after = 0
    let touched = 0
    for (const { text, segment } of texts.values()) {
      if (!e.engine.applies(segment)) continue
      const out = e.engine.apply(text, segment, cfg, noRaw)
      before += countTokens(text)
      after += countTokens(out)
      if (out !== text) touched++
    }
    console.log(
      `${e.label.padEnd(14)} recorded, applicable ${String(before).padStart(7)} → ${String(after).padStart(7)}  ${(((before - after) / before) * 100).toFixed(1)}%  (${touched} texts changed)`
    )
  }
}
