import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { Redis } from "ioredis"
import { describe, expect, it } from "vitest"
import { psql, required, startNginx } from "./support/servers.js"

/** The servers the scale-out suite runs on are there and answer (what a failure here means: install them). */
describe("scale-out servers", () => {
  it("PostgreSQL answers, with the C collation the store expects", async () => {
    const url = required("GATEWAY_TEST_DATABASE_URL")
    expect(Number(psql(url, "SELECT current_setting('server_version_num')"))).toBeGreaterThanOrEqual(130000)
    expect(psql(url, "SELECT datcollate FROM pg_database WHERE datname = current_database()")).toBe("C")
  })

  it("Redis answers", async () => {
    const redis = new Redis(required("GATEWAY_TEST_REDIS_URL"), { lazyConnect: true, maxRetriesPerRequest: 1 })
    await redis.connect()
    try {
      expect(await redis.ping()).toBe("PONG")
    } finally {
      redis.disconnect()
    }
  })

  it("nginx spreads requests round robin over its upstreams", async () => {
    const servers = await Promise.all(
      ["a", "b"].map(
        (name) =>
          new Promise<http.Server>((resolve) => {
            const s = http.createServer((_req, res) => res.end(name))
            s.listen(0, "127.0.0.1", () => resolve(s))
          })
      )
    )
    const nginx = await startNginx(servers.map((s) => `127.0.0.1:${(s.address() as AddressInfo).port}`))
    try {
      const answers = []
      for (let i = 0; i < 4; i++) answers.push(await (await fetch(nginx.url)).text())
      expect(answers.sort()).toEqual(["a", "a", "b", "b"])
    } finally {
      await nginx.stop()
      for (const s of servers) s.close()
    }
  })
})
