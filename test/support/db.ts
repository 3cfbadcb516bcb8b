import Database from "better-sqlite3"
import * as path from "node:path"
import { databaseOf, queryPgSync } from "./pgStore.js"

/** Runs one read-only query against a gateway's database file, as an operator would with sqlite3. */
export const queryDb = <T = Record<string, any>>(dataDir: string, sql: string, ...params: Array<unknown>): Array<T> => {
  // A gateway on PostgreSQL (GATEWAY_TEST_STORE=postgres): the same query on its database.
  const pg = databaseOf(dataDir)
  if (pg !== undefined) return queryPgSync<T>(pg, sql, params)
  const db = new Database(path.join(dataDir, "gateway.db"), { readonly: true })
  try {
    return db.prepare(sql).all(...params) as Array<T>
  } finally {
    db.close()
  }
}
