import { fork } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Worker } from "node:cluster"
import { describe, expect, it } from "vitest"
import { makeRelay } from "../src/platform/state/clusterIpc.js"
import { tempDir } from "./support/gateway.js"

/** Blocks this thread: the child exits meanwhile, and its `disconnect` is not seen before the send. */
const busyWait = (ms: number) => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    // spin
  }
}

describe("the primary's relay (state/clusterIpc.ts)", () => {
  it("a worker whose channel broke before its disconnect was seen: the message is dropped, no error event", async () => {
    const dir = tempDir("relay-")
    const script = path.join(dir, "child.cjs")
    fs.writeFileSync(script, 'process.send("ready"); process.on("message", () => process.exit(0))\n')
    const child = fork(script, [], { stdio: ["ignore", "ignore", "ignore", "ipc"] })
    const errors: Array<Error> = []
    child.on("error", (e) => errors.push(e))
    await new Promise<void>((resolve) => child.once("message", () => resolve()))
    // A cluster worker as the relay sees it: its channel and `send`.
    const worker = {
      isConnected: () => child.connected,
      send: (...args: Array<unknown>) => (child.send as (...a: Array<unknown>) => boolean)(...args)
    }
    const other = { isConnected: () => true, send: () => true }
    const relay = makeRelay({ workers: () => [worker, other] as unknown as Array<Worker>, onStop: () => undefined })
    child.send("exit")
    busyWait(500)
    // Still connected as far as this process knows: the broken pipe is found by the write.
    expect(child.connected).toBe(true)
    relay(other as unknown as Worker, { gw: "pub", topic: "t", text: "x" })
    await new Promise((resolve) => setTimeout(resolve, 50))
    await new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())))
    expect(errors.map((e) => e.message)).toEqual([])
  })
})
