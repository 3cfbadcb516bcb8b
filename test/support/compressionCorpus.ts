import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as path from "node:path"
import type { EngineContext, Segment, TextEngine } from "../../src/services/context/types.js"

/** One case of an engine's corpus: test/fixtures/compression/<engine>/<case>.input.txt and friends. */
export interface CorpusCase {
  readonly name: string
  readonly input: string
  readonly expected: string | undefined
  readonly expectedPath: string
  readonly segment: Segment
  readonly config: unknown
}

const DIR = path.join(import.meta.dirname, "..", "fixtures", "compression")

export const loadCorpus = (engine: string, defaultSegment: Segment): ReadonlyArray<CorpusCase> => {
  const dir = path.join(DIR, engine)
  const read = (file: string): string | undefined =>
    fs.existsSync(path.join(dir, file)) ? fs.readFileSync(path.join(dir, file), "utf8") : undefined
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".input.txt"))
    .sort()
    .map((f) => {
      const name = f.slice(0, -".input.txt".length)
      const segment = read(`${name}.segment.json`)
      const config = read(`${name}.config.json`)
      return {
        name,
        input: read(f)!,
        expected: read(`${name}.expected.txt`),
        expectedPath: path.join(dir, `${name}.expected.txt`),
        segment: segment ? { ...defaultSegment, ...JSON.parse(segment) } : defaultSegment,
        config: config ? JSON.parse(config) : {}
      }
    })
}

export const noRaw: EngineContext = { keepRaw: () => "unused" }

/** Runs an engine on a case the way the service does: only when it applies, with the decoded config. */
export const runCase = <C, I>(engine: TextEngine<C>, config: Schema.Schema<C, I>, c: CorpusCase): string =>
  engine.applies(c.segment) ? engine.apply(c.input, c.segment, Schema.decodeUnknownSync(config)(c.config), noRaw) : c.input
