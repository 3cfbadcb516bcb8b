import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). Compression and context (docs/compression.md): compression combos
 * and their assignments, memory entries, injected skills, savings per day, and the raw tool outputs rtk cut.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE compression_combos (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    engines TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE compression_assignments (
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    combo_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (kind, target)
  )`
  yield* sql`CREATE TABLE context_memory (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    scope TEXT NOT NULL,
    scope_id TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    enabled BIGINT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE context_skills (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL,
    catalog_id TEXT,
    text TEXT NOT NULL,
    trigger TEXT NOT NULL,
    enabled BIGINT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE compression_stats (
    day TEXT NOT NULL,
    engine TEXT NOT NULL,
    combo TEXT NOT NULL,
    model TEXT NOT NULL,
    requests BIGINT NOT NULL DEFAULT 0,
    tokens_before BIGINT NOT NULL DEFAULT 0,
    tokens_after BIGINT NOT NULL DEFAULT 0,
    saved_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    injected_tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day, engine, combo, model)
  )`
  yield* sql`CREATE TABLE rtk_raw_outputs (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  )`
  for (const table of ["compression_combos", "compression_assignments", "context_memory", "context_skills"])
    yield* notifyOnChange(sql, table)
})
