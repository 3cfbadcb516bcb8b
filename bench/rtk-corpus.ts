/**
 * rtk over its test corpus (test/fixtures/compression/rtk): tokens before and after per case
 * (o200k, src/upstream/formats/tokens.ts' tokenizer) and in total, for docs/compression.md. Not timed.
 *
 *   npx vite-node bench/rtk-corpus.ts            (the table)
 *   npx vite-node bench/rtk-corpus.ts --write    (also (re)writes each case's .expected.txt: check them by eye)
 */
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Schema from "effect/Schema"
import { RtkConfig, rtk } from "../src/services/context/engines/rtk.js"
import type { Segment } from "../src/services/context/types.js"

const dir = path.join(import.meta.dirname, "../test/fixtures/compression/rtk")
const write = process.argv.includes("--write")
const cases = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith(".input.txt"))
  .map((f) => f.slice(0, -".input.txt".length))
  .sort()

let before = 0
let after = 0
const rows: Array<string> = []
for (const name of cases) {
  const input = fs.readFileSync(path.join(dir, `${name}.input.txt`), "utf8")
  const segmentFile = path.join(dir, `${name}.segment.json`)
  const configFile = path.join(dir, `${name}.config.json`)
  const segment: Segment = {
    role: "tool",
    kind: "tool-result",
    turn: 0,
    turns: 1,
    ...(fs.existsSync(segmentFile) ? JSON.parse(fs.readFileSync(segmentFile, "utf8")) : {})
  }
  const config = Schema.decodeUnknownSync(RtkConfig)(fs.existsSync(configFile) ? JSON.parse(fs.readFileSync(configFile, "utf8")) : {})
  let n = 0
  const output = rtk.apply(input, segment, config, { keepRaw: () => `raw-${++n}` })
  if (write) fs.writeFileSync(path.join(dir, `${name}.expected.txt`), output)
  const b = countTokens(input)
  const a = countTokens(output)
  before += b
  after += a
  rows.push(`| ${name} | ${b} | ${a} | ${b === 0 ? 0 : Math.round((100 * (b - a)) / b)}% |`)
}
console.log("| case | tokens before | tokens after | saved |\n| --- | ---: | ---: | ---: |")
console.log(rows.join("\n"))
console.log(`| **total** | ${before} | ${after} | ${Math.round((100 * (before - after)) / before)}% |`)
