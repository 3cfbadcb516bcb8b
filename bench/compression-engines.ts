/**
 * Token savings of the caveman, whitespace and json engines on their test corpus
 * (test/fixtures/compression/<engine>/), counted with the o200k tokenizer (src/formats/tokens.ts'
 * counter). Not timed.
 *
 *   npx vite-node bench/compression-engines.ts            (--write: write missing expected outputs, to review by eye)
 */
import * as fs from "node:fs"
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"
import * as caveman from "../src/context/engines/caveman.js"
import * as json from "../src/context/engines/json.js"
import * as whitespace from "../src/context/engines/whitespace.js"
import { loadCorpus, runCase } from "../test/support/compressionCorpus.js"

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
    console.log(`${e.id.padEnd(10)} ${c.name.padEnd(28)} ${String(b).padStart(5)} → ${String(a).padStart(5)}  ${(((b - a) / b) * 100).toFixed(1)}%`)
  }
  console.log(`${e.id.padEnd(10)} ${"TOTAL".padEnd(28)} ${String(before).padStart(5)} → ${String(after).padStart(5)}  ${(((before - after) / before) * 100).toFixed(1)}%\n`)
}
