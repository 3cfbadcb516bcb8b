// The usage write-ahead (src/services/usage/InFlight.ts) on a real SQLite file: a request that runs
// past WRITE_AHEAD_AFTER_MS is on disk while it runs, also when it begins with nothing else in
// flight (the sweep asleep, armed by the request), and after a short request has come and gone (its
// timer disarmed); short requests leave nothing behind; a write the store could not take is tried
// again until it goes through.
import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { BatchWriter } from "../src/platform/store/BatchWriter.js"
import { StoreLive } from "../src/platform/store/StoreLive.js"
import { InFlight, WRITE_AHEAD_AFTER_MS } from "../src/services/usage/InFlight.js"
import Database from "better-sqlite3"
import * as path from "node:path"
import { queryDb } from "./support/db.js"
import { tempDir } from "./support/gateway.js"

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)

const inFlightAt = (dataDir: string) =>
  InFlight.layer.pipe(
    Layer.provideMerge(StoreLive),
    Layer.provide(AppConfig.layerTest({ dataDir })),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map()))),
    Layer.provide(quiet)
  )

const written = (dataDir: string): ReadonlyArray<string> =>
  queryDb<{ request_id: string }>(dataDir, "SELECT request_id FROM usage_inflight ORDER BY request_id").map((r) => r.request_id)

const sleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))

/** Polls the database on the wall clock until `ok` holds of what is written ahead (at most `ms`). */
const until = (dataDir: string, ok: (ids: ReadonlyArray<string>) => boolean, ms = 3_000) =>
  Effect.gen(function* () {
    const end = Date.now() + ms
    while (!ok(written(dataDir)) && Date.now() < end) yield* sleep(10)
    return written(dataDir)
  })

const request = (requestId: string) => ({ requestId, startedAt: Date.now(), endpoint: "chat.completions", apiKeyId: null })

describe("usage write-ahead", () => {
  it.live("writes a long request ahead when it begins with nothing else in flight", () => {
    const dir = tempDir()
    return Effect.gen(function* () {
      const inflight = yield* InFlight
      // Nothing in flight for a while: the sweep is asleep.
      yield* sleep(3 * WRITE_AHEAD_AFTER_MS)
      inflight.begin(request("long"))
      expect(yield* until(dir, (ids) => ids.length > 0)).toEqual(["long"])
      inflight.end("long")
      expect(inflight.running()).toEqual([])
    }).pipe(Effect.provide(inFlightAt(dir)))
  })

  it.live("leaves short requests off the disk and still writes the next long one", () => {
    const dir = tempDir()
    return Effect.gen(function* () {
      const inflight = yield* InFlight
      yield* sleep(3 * WRITE_AHEAD_AFTER_MS)
      // Short requests one after another, each alone in flight, past the moment the first would have been due.
      for (let i = 0; i < 6; i++) {
        inflight.begin(request(`short-${i}`))
        yield* Effect.yieldNow()
        inflight.end(`short-${i}`)
        yield* sleep(WRITE_AHEAD_AFTER_MS / 2)
      }
      expect(written(dir)).toEqual([])
      // A long one after them, and one that overlaps it and ends early.
      inflight.begin(request("long"))
      inflight.begin(request("brief"))
      yield* Effect.yieldNow()
      inflight.end("brief")
      expect(yield* until(dir, (ids) => ids.length > 0)).toEqual(["long"])
      inflight.end("long")
      // Its row goes once the usage row has had time to be written (KEEP_AFTER_END_MS).
      expect(yield* until(dir, (ids) => ids.length === 0, 5_000)).toEqual([])
    }).pipe(Effect.provide(inFlightAt(dir)))
  })

  // The sweep's write waits out the busy timeout (5 s), fails as the store unavailable, and is
  // tried again from the next sweep until the lock goes: on the writer thread once a batch has
  // started it, on the main connection before (and on PostgreSQL, through the layer's runtime).
  for (const where of ["on the writer thread", "on the main connection, before the writer thread starts"] as const)
    it.live(
      `writes a long request ahead once its file is no longer locked by another connection, and removes it after the request (${where})`,
      () => {
        const dir = tempDir()
        return Effect.gen(function* () {
          const inflight = yield* InFlight
          if (where === "on the writer thread") {
            const writer = yield* BatchWriter
            writer.append("usage", { ts: Date.now(), request_id: "first", endpoint: "chat.completions", stream: 0, status: 200 })
            yield* writer.flush
          }
          const other = new Database(path.join(dir, "gateway.db"))
          other.exec("BEGIN IMMEDIATE")
          inflight.begin(request("locked"))
          yield* sleep(6_000)
          const whileLocked = written(dir)
          other.exec("ROLLBACK")
          other.close()
          expect(whileLocked).toEqual([])
          expect(yield* until(dir, (ids) => ids.length > 0, 8_000)).toEqual(["locked"])
          inflight.end("locked")
          expect(yield* until(dir, (ids) => ids.length === 0, 5_000)).toEqual([])
        }).pipe(Effect.provide(inFlightAt(dir)))
      },
      { timeout: 30_000 }
    )
})
