/**
 * Global setup of `npm run test:scale`: one private PostgreSQL cluster and one Redis server for
 * the whole run (tests create their own databases and use their own key prefixes), their URLs
 * handed to the test files as GATEWAY_TEST_DATABASE_URL and GATEWAY_TEST_REDIS_URL. When both
 * variables are already set (servers you run yourself), those are used and nothing is started.
 */
import { startPostgres, startRedis, type Server } from "./support/servers.js"

export default async function setup(): Promise<() => Promise<void>> {
  const started: Array<Server> = []
  try {
    if (!process.env["GATEWAY_TEST_DATABASE_URL"]) {
      const pg = await startPostgres()
      started.push(pg)
      process.env["GATEWAY_TEST_DATABASE_URL"] = pg.url
    }
    if (!process.env["GATEWAY_TEST_REDIS_URL"]) {
      const redis = await startRedis()
      started.push(redis)
      process.env["GATEWAY_TEST_REDIS_URL"] = redis.url
    }
  } catch (e) {
    for (const s of started) await s.stop()
    throw e
  }
  return async () => {
    for (const s of started.reverse()) await s.stop()
  }
}
