import { afterAll } from "vitest"
import { createTestDatabase, dropTestDatabase } from "../support/pgStore.js"
import { playgroundCases } from "../support/playgroundCases.js"

/** The playground backend's cases (test/support/playgroundCases.ts) on PostgreSQL: a fresh database per gateway. */
const made: Array<string> = []
playgroundCases(async () => {
  const url = await createTestDatabase()
  made.push(url)
  return { DATABASE_URL: url }
})
afterAll(async () => {
  for (const url of made) await dropTestDatabase(url)
})
