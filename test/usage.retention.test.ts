import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as TestClock from "effect/TestClock"
import { AccountingConfig } from "../src/services/accounting/AccountingConfig.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import * as Db from "../src/platform/store/Db.js"
import { UsageRetention } from "../src/services/usage/UsageQueries.js"
import { tempDir } from "./support/gateway.js"

const DAY = 86_400_000
const quiet = Logger.replace(Logger.defaultLogger, Logger.none)

const insert = (ts: number, n: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.forEach(
      Array.from({ length: n }, (_, i) => i),
      (i) => sql`INSERT INTO usage (ts, request_id, endpoint, status) VALUES (${ts + i}, ${`r${ts}-${i}`}, 'chat.completions', 200)`,
      { discard: true }
    )
  )

const count = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT COUNT(*) AS n FROM usage`).pipe(
  Effect.map((r) => r[0]!.n)
)

describe("usage retention", () => {
  it.scoped("deletes rows older than the retention period, then the oldest beyond the row cap, a minute after start and hourly", () =>
    Effect.gen(function* () {
      const db = Db.layer.pipe(Layer.provide(AppConfig.layerTest({ dataDir: tempDir() })), Layer.provide(quiet))
      const config = AccountingConfig.layerTest({ usageRetentionDays: 30, usageMaxRows: 1000 })
      const ctx = yield* Layer.build(Layer.merge(db, config))
      yield* Effect.gen(function* () {
        yield* TestClock.setTime(100 * DAY)
        yield* insert(10 * DAY, 5) // 90 days old
        yield* insert(95 * DAY, 1100) // recent, 100 beyond the cap
        yield* Layer.buildWithScope(UsageRetention, yield* Effect.scope)
        expect(yield* count).toBe(1105)
        yield* TestClock.adjust("61 seconds")
        expect(yield* count).toBe(1000)
        // The oldest recent rows went, the newest stayed.
        const sql = yield* SqlClient.SqlClient
        const [oldest] = yield* sql<{ ts: number }>`SELECT MIN(ts) AS ts FROM usage`
        expect(oldest!.ts).toBe(95 * DAY + 100)
        yield* insert(99 * DAY, 10)
        yield* TestClock.adjust("1 hour")
        expect(yield* count).toBe(1000)
      }).pipe(Effect.provide(ctx), Effect.provide(quiet))
    })
  )
})
