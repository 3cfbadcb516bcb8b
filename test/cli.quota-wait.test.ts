import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_KEY, runCli, setupWithProvider, startServerProcess } from "./support/cli.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { tempDir } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * The CLI's quota-wait options (docs/cli.md; docs/resilience.md, "Waiting out a quota"), through the
 * `gateway` command and a gateway process: `combo create --max-queue-wait` and `combo queue-wait`
 * set how long a combo's requests wait for an upstream's quota to reset, `keys add` and
 * `keys limits --max-queue-wait` a key's; a value the API refuses is refused by the CLI too. The
 * running server honours what the CLI wrote: an OpenAI SDK request meeting a 429 with
 * `retry-after: 2` is parked and served after the reset while the combo allows a wait, and answered
 * the 429 at once when the CLI turned the wait off.
 */
const QUOTA = { status: 429, headers: { "retry-after": "2" }, errorMessage: "Rate limit reached for requests" }

describe("gateway combo and keys: --max-queue-wait", () => {
  let upstream: FakeUpstream
  let dataDir: string
  let env: Record<string, string>
  beforeAll(async () => {
    upstream = (await FakeUpstream.start()).always({ content: "after the reset" })
    dataDir = tempDir()
    const set = await setupWithProvider(dataDir, upstream.baseUrl("openai-chat"))
    expect(set.code, set.stderr).toBe(0)
    env = { DATA_DIR: dataDir }
  })
  afterAll(async () => {
    await upstream?.close()
  })

  it("keys add and keys limits set a key's longest wait; 0 turns it off; a value out of range is refused", async () => {
    const added = await runCli(["keys", "add", "--name", "waiter", "--max-queue-wait", "20", "--json"], env)
    expect(added.code, added.stderr).toBe(0)
    expect(JSON.parse(added.stdout).maxQueueWaitSeconds).toBe(20)
    const limited = await runCli(["keys", "limits", "waiter", "--max-queue-wait", "5", "--json"], env)
    expect(limited.code, limited.stderr).toBe(0)
    expect(JSON.parse(limited.stdout).maxQueueWaitSeconds).toBe(5)
    const off = await runCli(["keys", "limits", "waiter", "--max-queue-wait", "0", "--json"], env)
    expect(off.code, off.stderr).toBe(0)
    expect(JSON.parse(off.stdout).maxQueueWaitSeconds ?? 0).toBe(0)
    const bad = await runCli(["keys", "limits", "waiter", "--max-queue-wait", "-1"], env)
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("maxQueueWaitSeconds")
  })

  it("combo create --max-queue-wait parks a running server's request until the reset; combo queue-wait 0 turns it off", async () => {
    const server = await startServerProcess({ DATA_DIR: dataDir })
    try {
      const created = await runCli(
        ["combo", "create", "waits", "--strategy", "priority", "--target", "openai-compatible/m1", "--max-queue-wait", "30", "--json"],
        env
      )
      expect(created.code, created.stderr).toBe(0)
      expect(JSON.parse(created.stdout).config.maxQueueWaitSeconds).toBe(30)
      const bad = await runCli(["combo", "queue-wait", "waits", "--max-queue-wait", "100000"], env)
      expect(bad.code).not.toBe(0)
      expect(bad.stderr).toContain("maxQueueWaitSeconds")
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0, timeout: 30_000 })
      // The server reads the combo the CLI wrote (its model list shows it once its cache has it).
      await until("the server knows the combo", async () => (await client.models.list()).data.some((m) => m.id === "waits"))

      upstream.requests.length = 0
      upstream.next(QUOTA)
      const served = await client.chat.completions.create({ model: "waits", messages: [{ role: "user", content: "wait" }] })
      expect(served.choices[0]!.message.content).toBe("after the reset")
      // Sent at the 429, then again after the reset: the SDK made one request and never retried.
      expect(upstream.requests).toHaveLength(2)

      const turnedOff = await runCli(["combo", "queue-wait", "waits", "--max-queue-wait", "0", "--json"], env)
      expect(turnedOff.code, turnedOff.stderr).toBe(0)
      expect(JSON.parse(turnedOff.stdout).config.maxQueueWaitSeconds).toBeUndefined()
      // Once the server has the change, a 429 is answered at once, as without a wait.
      await until("the server has the combo without a wait", async () => {
        const r = await fetch(`${server.url}/api/combos`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
        const combo = ((await r.json()) as { combos: Array<{ name: string; config: Record<string, unknown> }> }).combos.find(
          (c) => c.name === "waits"
        )
        return combo !== undefined && combo.config["maxQueueWaitSeconds"] === undefined
      })
      upstream.requests.length = 0
      upstream.next(QUOTA)
      const refused = await client.chat.completions.create({ model: "waits", messages: [{ role: "user", content: "now" }] }).catch((e) => e)
      expect(refused).toBeInstanceOf(OpenAI.RateLimitError)
      expect(upstream.requests).toHaveLength(1)
    } finally {
      await server.stop()
    }
  })
})
