import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { LogFile, logFileOf } from "../src/services/observability/LogFile.js"
import { layerWithFile } from "../src/services/observability/Logging.js"

/**
 * The log file is written a moment after a line is queued and at shutdown: nothing wakes to
 * flush it while nothing is logged (an idle gateway logs nothing).
 */
describe("the log file's flush", () => {
  it("LogFile says when a line is queued into an empty buffer, once until it is flushed", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "logfile-"))
    let queued = 0
    const file = new LogFile({ file: path.join(dir, "gateway.log"), maxBytes: 1 << 20, keep: 1, onQueued: () => queued++ })
    file.push("a")
    file.push("b")
    expect(queued).toBe(1)
    file.flush()
    expect(fs.readFileSync(path.join(dir, "gateway.log"), "utf8")).toBe("a\nb\n")
    file.push("c")
    expect(queued).toBe(2)
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("a logged line reaches the file within a moment, and one logged just before shutdown at shutdown", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "logging-"))
    const logged = (text: string) => fs.existsSync(logFileOf(dataDir)) && fs.readFileSync(logFileOf(dataDir), "utf8").includes(text)
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.buildWithScope(layerWithFile, yield* Effect.scope).pipe(
            Effect.flatMap((ctx) =>
              Effect.gen(function* () {
                yield* Effect.logWarning("first line").pipe(Effect.provide(ctx))
                const until = Date.now() + 5_000
                while (!logged("first line") && Date.now() < until) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
                expect(logged("first line")).toBe(true)
                yield* Effect.logWarning("last line").pipe(Effect.provide(ctx))
              })
            )
          )
        })
      ).pipe(Effect.provide(AppConfig.layerTest({ dataDir })))
    )
    expect(logged("last line")).toBe(true)
    fs.rmSync(dataDir, { recursive: true, force: true })
  })
})
