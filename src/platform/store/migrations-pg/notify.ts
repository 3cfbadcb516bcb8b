import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The channel `StoreVersion` listens on (src/platform/store/postgres.ts): a notification after every
 * committed transaction that changed a table some in-memory cache is loaded from.
 */
export const CHANGE_CHANNEL = "gateway_store_changed"

/**
 * A statement-level trigger on `table` that NOTIFYs `CHANGE_CHANNEL` with its name, once per committed transaction; only on
 * tables a cache loads from, never on request-path ones (docs/scale-out.md#changes-between-processes).
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
