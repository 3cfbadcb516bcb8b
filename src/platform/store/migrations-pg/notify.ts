import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The channel `StoreVersion` listens on (src/platform/store/postgres.ts): a notification after every
 * committed transaction that changed a table some in-memory cache is loaded from.
 */
export const CHANGE_CHANNEL = "gateway_store_changed"

/**
 * A statement-level trigger on `table` that NOTIFYs `CHANGE_CHANNEL` with the table's name.
 * PostgreSQL delivers a notification only when the transaction commits and folds identical
 * ones of one transaction into one, so a batch of writes costs one message. Tables written on
 * the request path (usage, usage_inflight, audit_log, cache_entries, batch lines, deliveries)
 * carry none: no cache is loaded from them. A migration that adds a table a cache reads adds
 * its trigger too (docs/scale-out.md, "PostgreSQL").
 */
export const notifyOnChange = (sql: SqlClient.SqlClient, table: string) =>
  Effect.gen(function* () {
    yield* sql.unsafe(`CREATE OR REPLACE FUNCTION gateway_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('${CHANGE_CHANNEL}', TG_TABLE_NAME);
  RETURN NULL;
END
$$`)
    yield* sql.unsafe(
      `CREATE TRIGGER ${table}_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION gateway_notify_change()`
    )
  })
