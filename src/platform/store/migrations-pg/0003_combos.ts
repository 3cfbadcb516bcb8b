import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/** Routing combos (a name used as a model id, a strategy, targets, config), and the account tier of a connection (auto scoring). */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE combos (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL, -- unique regardless of case: combos_name_key on lower(name), 0007
    strategy TEXT NOT NULL,
    targets TEXT NOT NULL DEFAULT '[]',
    config TEXT NOT NULL DEFAULT '{}',
    description TEXT,
    enabled BIGINT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`ALTER TABLE connections ADD COLUMN account_tier TEXT`
  yield* notifyOnChange(sql, "combos")
})
