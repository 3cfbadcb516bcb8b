import * as fs from "node:fs"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { describe, expect, it } from "vitest"
import { ServerActivity } from "../src/platform/system/IdleMemory.js"
import { loadTrimMemory, MallocTrim, makeMallocTrim, type TrimMemory } from "../src/platform/system/MallocTrim.js"

/**
 * src/platform/system/MallocTrim.ts and the native addon's `trimMemory()` (native/src/tproxy.c): the C heap's freed
 * pages go back to the system. Seen from outside as this process's resident memory: Buffers of 1 KB are allocated by
 * malloc one by one; keeping every 64th alive after the rest are collected leaves the heap's top in use, so glibc keeps
 * the freed chunks between them (and their pages) until something trims them. The addon must be built: without it the
 * tests fail saying how to build it.
 */
const rssMb = (): number => Number(/VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync("/proc/self/status", "utf8"))![1]) / 1024

const gc = (): void => {
  v8.setFlagsFromString("--expose-gc")
  try {
    ;(vm.runInNewContext("gc") as () => void)()
  } finally {
    v8.setFlagsFromString("--no-expose-gc")
  }
}

const trimMemory = (): TrimMemory => {
  const trim = loadTrimMemory()
  if (typeof trim === "string") throw new Error(`trimMemory is unavailable (${trim}); build the addon with \`npm run build:native\``)
  return trim
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Frees ~`mb` MB of malloc'd Buffer memory, keeping every 64th Buffer (returned: keep it referenced) so the heap cannot shrink from its top. */
const fragment = async (mb: number): Promise<Array<Buffer>> => {
  const kept: Array<Buffer> = []
  let all: Array<Buffer> | null = []
  for (let i = 0; i < mb * 1024; i++) {
    const b = Buffer.allocUnsafeSlow(1024)
    b.fill(i & 0xff)
    all.push(b)
    if (i % 64 === 0) kept.push(b)
  }
  all = null
  // The backing stores are freed when their Buffers are collected (V8 may sweep them on another thread).
  for (let i = 0; i < 3; i++) {
    gc()
    await sleep(100)
  }
  return kept
}

describe.runIf(process.platform === "linux")("giving the C heap's freed pages back (glibc)", () => {
  it("trimMemory() returns the pages of freed chunks to the system", { timeout: 30_000 }, async () => {
    const trim = trimMemory()
    const kept = await fragment(96)
    await sleep(500)
    const before = rssMb()
    const released = await trim()
    const after = rssMb()
    expect(released, "malloc_trim reported pages released").toBe(true)
    expect(before - after, `RSS ${before.toFixed(0)} -> ${after.toFixed(0)} MB`).toBeGreaterThan(48)
    expect(
      kept.every((b, i) => b[0] === ((i * 64) & 0xff)),
      "the Buffers kept keep their bytes"
    ).toBe(true)
  })

  it("the layer trims once per rest, checked every GATEWAY_MALLOC_TRIM_SECONDS; not while the event loop is busy, nor with 0", {
    timeout: 30_000
  }, async () => {
    const trim = trimMemory()
    let calls = 0
    const counted = makeMallocTrim(() => () => {
      calls++
      return trim()
    })
    /** The layer for `ms`, `busy` keeping the event loop busy meanwhile (20 ms of work, then a turn); the trims it made. */
    const run = async (seconds: string, ms: number, busy = false) => {
      calls = 0
      let spinning = busy
      const spin = () => {
        const until = performance.now() + 20
        while (performance.now() < until) {}
        if (spinning) setImmediate(spin)
      }
      if (busy) spin()
      await Effect.runPromise(
        Layer.launch(counted).pipe(
          Effect.timeoutTo({ duration: ms, onTimeout: () => undefined, onSuccess: () => undefined }),
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["GATEWAY_MALLOC_TRIM_SECONDS", seconds]])))
        )
      )
      spinning = false
      return calls
    }
    expect(await run("0", 1_000), "with 0").toBe(0)
    expect(await run("0.2", 1_500, true), "every 0.2 s, the event loop busy").toBe(0)
    // At rest for 2.6 s, checked every 0.5 s: one trim, not five. (Every 0.5 s rather than 0.2:
    // a round counts as busy past 5% of its length, and under a full suite's load one collection
    // of the test process could pass 10 ms and start a second rest; 25 ms it does not.)
    expect(await run("0.5", 2_600), "every 0.5 s at rest").toBe(1)
    // And what it gives back is seen from outside: the layer as shipped, on freed Buffers.
    const kept = await fragment(96)
    await sleep(500)
    const before = rssMb()
    await Effect.runPromise(
      Layer.launch(MallocTrim).pipe(
        Effect.timeoutTo({ duration: 1_000, onTimeout: () => undefined, onSuccess: () => undefined }),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["GATEWAY_MALLOC_TRIM_SECONDS", "0.2"]])))
      )
    )
    const after = rssMb()
    expect(before - after, `every 0.2 s at rest: RSS ${before.toFixed(0)} -> ${after.toFixed(0)} MB`).toBeGreaterThan(48)
    expect(kept.length).toBe(1536)
  })

  it("not while requests keep coming, however idle the event loop; once they stop or come now and then", { timeout: 30_000 }, async () => {
    const trim = trimMemory()
    let calls = 0
    let received = 0
    const counted = makeMallocTrim(() => () => {
      calls++
      return trim()
    })
    const server = Layer.succeed(ServerActivity, { inFlight: () => 0, received: () => received })
    const run = (ms: number) =>
      Effect.runPromise(
        Layer.launch(counted).pipe(
          Effect.provide(server),
          Effect.timeoutTo({ duration: ms, onTimeout: () => undefined, onSuccess: () => undefined }),
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["GATEWAY_MALLOC_TRIM_SECONDS", "0.2"]])))
        )
      )
    // A request every 50 ms (light traffic: the event loop at rest): no trim in 1.5 s.
    const traffic = setInterval(() => received++, 50)
    try {
      await run(1_500)
    } finally {
      clearInterval(traffic)
    }
    expect(calls, "requests coming in every 50 ms").toBe(0)
    expect(received).toBeGreaterThan(20)
    // None: trimmed (once per rest; a round whose event loop was busy starts another).
    await run(1_500)
    expect(calls, "no request").toBeGreaterThanOrEqual(1)
    // A request now and then (a dashboard's poll, a probe) does not put it off for good.
    calls = 0
    const probe = setTimeout(() => received++, 300)
    await run(1_500)
    clearTimeout(probe)
    expect(calls, "one request in 1.5 s").toBeGreaterThanOrEqual(1)
  })
})
