import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_KEY, setupWithProvider, startServerProcess } from "./support/cli.js"
import { queryDb } from "./support/db.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { call, tempDir } from "./support/gateway.js"
import { until } from "./support/until.js"
import { Receiver, verifyWithLibrary } from "./support/webhookReceiver.js"

/**
 * Pending deliveries are written in batches (docs/webhooks.md, "Persistence"): once written they
 * survive even a kill -9 of the gateway process (bin/gateway), and the next start sends them
 * again with the same webhook-id (at-least-once).
 */
const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const fake = fakeOpenAIForFile()
let receiver: Receiver

beforeAll(async () => {
  receiver = await Receiver.start()
})
afterAll(() => receiver?.close())

const pendingRows = (dir: string) => queryDb<{ n: number }>(dir, "SELECT count(*) AS n FROM webhook_deliveries")[0]!.n

describe("pending deliveries and a crash", () => {
  // Three process starts (setup, the gateway, its restart): a generous limit for a loaded machine (nothing here asserts a time).
  it("deliveries pending when the process is killed with SIGKILL are sent again after the restart, with the same webhook-id", {
    timeout: 90_000
  }, async () => {
    fake.upstream.always({ content: "hi" })
    const dataDir = tempDir()
    expect((await setupWithProvider(dataDir, fake.upstream.baseUrl)).code).toBe(0)
    receiver.answer = () => "hang"
    const first = await startServerProcess({ DATA_DIR: dataDir, GATEWAY_WEBHOOK_RETRY_BASE_MS: "50" })
    let secret = ""
    const traces: Array<string> = []
    try {
      const created = await call(`${first.url}/api/webhooks`, {
        body: { url: receiver.url, events: ["request.completed"] },
        headers: admin
      })
      expect(created.status, created.text).toBe(201)
      secret = created.body.secret
      for (let i = 0; i < 3; i++) {
        const res = await call(`${first.url}/v1/chat/completions`, {
          body: { model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] },
          headers: admin
        })
        expect(res.status).toBe(200)
        traces.push(res.headers.get("x-gateway-request-id")!)
      }
      // The first delivery hangs at the receiver, the other two wait behind it; all three rows are on disk.
      await receiver.waitFor(1)
      await until("three pending rows written", () => pendingRows(dataDir) === 3)
    } finally {
      expect(await first.stop("SIGKILL")).toBeNull()
    }
    const beforeRestart = receiver.deliveries.length
    const hungId = receiver.deliveries[0]!.headers["webhook-id"]
    receiver.release(503)
    receiver.answer = () => 200

    const second = await startServerProcess({ DATA_DIR: dataDir })
    try {
      const again = await receiver.waitFor(beforeRestart + 3)
      const resent = again.slice(beforeRestart)
      expect(resent.map((d) => d.body.data.trace_id)).toEqual(traces)
      expect(resent[0]!.headers["webhook-id"]).toBe(hungId)
      for (const d of resent) expect(verifyWithLibrary(secret, d)).toMatchObject({ event: "request.completed" })
      await until("pending rows removed once delivered", () => pendingRows(dataDir) === 0)
    } finally {
      await second.stop("SIGTERM")
    }
  })
})
