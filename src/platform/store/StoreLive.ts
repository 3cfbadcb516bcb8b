import type { SqlClient } from "@effect/sql/SqlClient"
import type { PgClient } from "@effect/sql-pg/PgClient"
import * as Layer from "effect/Layer"
import type { AppConfig } from "../config/AppConfig.js"
import { BatchWriter } from "./BatchWriter.js"
import * as Db from "./Db.js"
import { KeyValue } from "./KeyValue.js"
import { Secrets } from "./Secrets.js"
import type { StoreHealth } from "./StoreHealth.js"
import type { StoreKind } from "./StoreKind.js"
import { StoreVersion } from "./StoreVersion.js"

/**
 * The store area: the database (SQLite in DATA_DIR or PostgreSQL, migrated before anything reads
 * it), its kind and health, the batched writer, the key-value table, the version another
 * process's write bumps, the secrets' key. Needs only AppConfig; the CLI's local commands use it
 * too (src/server/CoreLayer.ts). Built first, closed last: the writer's final flush runs after
 * every service that appends rows has stopped.
 */
export const StoreLive: Layer.Layer<
  SqlClient | PgClient | StoreKind | StoreHealth | BatchWriter | KeyValue | StoreVersion | Secrets,
  never,
  AppConfig
> = Layer.mergeAll(BatchWriter.layer, KeyValue.layer, StoreVersion.layer(), Secrets.layer).pipe(Layer.provideMerge(Db.layer))
