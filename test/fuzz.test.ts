import * as Effect from "effect/Effect"
import fc from "fast-check"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { runCli, type ServerProcess, startServerProcess } from "./support/cli.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import {
  abortInFlight,
  ADMIN_KEY,
  bodySweep,
  CLIENT_KEY,
  type FuzzCase,
  Findings,
  findingsDir,
  httpCaseArb,
  judge,
  loadCorpus,
  type Outcome,
  sendHttp,
  sendWs,
  wsCaseArb
} from "./support/fuzz.js"
import { call, localCore, startGateway, type TestGateway, tempDir } from "./support/gateway.js"

/**
 * Seeded property-based fuzzing of both planes (see test/support/fuzz.ts for what is generated
 * and what counts as a finding): requests and WebSocket frames derived from the recorded client
 * traffic, against the in-process gateway and against a spawned gateway process, whose heap
 * must come back near its level after. `npm test` runs a few hundred cases; `npm run fuzz`
 * (FUZZ_RUNS=10000) runs the same with more. FUZZ_SEED replays a run.
 */
const RUNS = Number(process.env["FUZZ_RUNS"] ?? 500)
const SEED = Number(process.env["FUZZ_SEED"] ?? 20128)
/** Cases against the spawned process (each crash there costs a restart). */
const PROCESS_RUNS = Math.max(100, Math.round(RUNS * 0.03))
/** The multi-MB body sweep: every method of every route, or (`npm test`) each route once. */
const FULL_SWEEP = RUNS >= 2000 || process.env["FUZZ_SWEEP"] === "all"
const DEADLINE_MS = 10_000
/** FUZZ_PROFILE=1: print the slowest cases (to keep the run fast). */
const PROFILE = process.env["FUZZ_PROFILE"] === "1"
const profile: Array<[number, string]> = []
/** Heap growth allowed after a forced GC: bounded caches (responses, answers, idempotency) legitimately hold some. */
const HEAP_MARGIN = 96 * 1024 * 1024

declare module "vitest" {
  interface TaskMeta {
    fuzz?: { cases: number; fivehundred: number; crashes: number; resets: number; hangs: number; other: number; unconfirmed: number }
  }
}

const admin = { authorization: `Bearer ${ADMIN_KEY}` }

/** The connections the gateway routes to, all on the fake upstream; most serve models a client of another family asks for. */
const connections = (up: FakeUpstream) => [
  {
    provider: "openai-compatible",
    name: "to-chat",
    priority: 1,
    baseUrl: up.baseUrl("openai-chat"),
    models: ["claude-opus-5-5", "claude-sonnet-4-5", "claude-haiku-4-5-20251001", "nomic-embed-text", "text-embedding-004", "m1"]
  },
  {
    provider: "openai-compatible",
    name: "to-resp",
    priority: 1,
    upstreamFormat: "openai-responses",
    baseUrl: up.baseUrl("openai-responses"),
    models: ["gpt-5", "gemini-2.5-flash", "gemini-3.1-pro-preview", "gemini-3.5-flash-lite", "gemini-3.8-flash"]
  },
  { provider: "ollama", name: "to-oll", priority: 1, baseUrl: up.baseUrl("ollama"), models: ["fake-model", "llama3"] },
  {
    provider: "anthropic",
    name: "to-anth",
    priority: 5,
    apiKey: "sk-ant-upstream",
    baseUrl: up.baseUrl("anthropic"),
    models: ["gpt-5.4-nano", "qwen3-coder-plus"]
  },
  {
    provider: "gemini",
    name: "to-gem",
    priority: 5,
    apiKey: "gemini-upstream-key",
    baseUrl: up.baseUrl("gemini"),
    models: ["text-embedding-3-small"]
  }
]
const OURS = new Set(["to-chat", "to-resp", "to-oll", "to-anth", "to-gem"])

/** Management calls whose success changes what later cases see (new connections, flags, combos). */
const DIRTYING =
  /^management (POST \/api\/providers|PUT \/api\/settings|DELETE \/api\/settings|POST \/api\/combos|PUT \/api\/combos|PATCH \/api\/combos|DELETE \/api\/combos|PATCH \/api\/resilience)/

/** Puts the gateway back as the fuzz set it up: only our connections, default flags, no combos. */
const restore = async (base: string) => {
  await call(`${base}/api/settings/feature-flags`, { method: "DELETE", headers: admin })
  for (const c of (await call(`${base}/api/providers`, { headers: admin })).body?.connections ?? []) {
    if (!OURS.has(c.name)) await call(`${base}/api/providers/${encodeURIComponent(c.id)}`, { method: "DELETE", headers: admin })
  }
  for (const c of (await call(`${base}/api/combos`, { headers: admin })).body?.combos ?? []) {
    await call(`${base}/api/combos/${encodeURIComponent(c.id)}`, { method: "DELETE", headers: admin })
  }
}

/** Provider bodies the management API may act on always point at the fake upstream: nothing leaves 127.0.0.1. */
const confine = (c: FuzzCase, upstream: string): FuzzCase => {
  if (c.kind !== "http" || !c.body || !/^management (POST|PUT) \/api\/providers/.test(c.route)) return c
  let body: unknown
  try {
    body = JSON.parse(c.body.toString("utf8"))
  } catch {
    return c
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return c
  // A key added last wins in JSON: appended to the bytes, so the rest (deep nesting, invalid UTF-8) stays as generated.
  const close = c.body.lastIndexOf(0x7d)
  const empty = Object.keys(body).length === 0
  const baseUrl = Buffer.from(`${empty ? "" : ","}"baseUrl":${JSON.stringify(`${upstream}/v1`)}}`, "utf8")
  return { ...c, body: Buffer.concat([c.body.subarray(0, close), baseUrl, c.body.subarray(close + 1)]) }
}

const send = (base: string, c: FuzzCase): Promise<Outcome> =>
  c.kind === "http" ? sendHttp(base, c, DEADLINE_MS) : sendWs(base, c, DEADLINE_MS)

/**
 * Every method of every route with a multi-MB body (test/support/fuzz.ts, `bodySweep`): all of
 * them in `npm run fuzz` (or with FUZZ_SWEEP=all), every 13th (each route once, the method
 * turning) in `npm test`.
 */
function* sweep(corpus: ReturnType<typeof loadCorpus>): Generator<FuzzCase> {
  let i = 0
  for (const c of bodySweep(corpus.http)) if (FULL_SWEEP || i++ % 13 === 0) yield c
}

/** All cases of a run: mostly HTTP over every route, one in ten a WebSocket session. */
const caseArb = (corpus: ReturnType<typeof loadCorpus>): fc.Arbitrary<FuzzCase> =>
  fc.oneof(
    { weight: 9, arbitrary: httpCaseArb(corpus.http) as fc.Arbitrary<FuzzCase> },
    { weight: 1, arbitrary: wsCaseArb(corpus.frames) as fc.Arbitrary<FuzzCase> }
  )

/** Runs `runs` generated cases through `each`, in order, reproducibly from `seed` (fast-check drives generation; no shrinking: every case
 * counts). */
const runCases = (seed: number, runs: number, arb: fc.Arbitrary<FuzzCase>, each: (c: FuzzCase, index: number) => Promise<void>) => {
  let index = 0
  return fc.assert(
    fc.asyncProperty(arb, async (c) => {
      await each(c, index++)
      return true
    }),
    { seed, numRuns: runs, endOnFailure: true }
  )
}

/** A forced GC in this process (the flag can be set at run time; the function comes from a fresh context). */
const forceGc = (): (() => void) => {
  v8.setFlagsFromString("--expose-gc")
  return vm.runInNewContext("gc") as () => void
}

const settleHeap = async (gc: () => void): Promise<number> => {
  for (let i = 0; i < 3; i++) {
    gc()
    await new Promise((r) => setTimeout(r, 50))
  }
  return process.memoryUsage().heapUsed
}

/** The heap of a process started with --inspect, after a GC it forces, over the inspector on 127.0.0.1. */
const remoteHeap = (inspectorUrl: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(inspectorUrl)
    const timer = setTimeout(() => (ws.terminate(), reject(new Error("inspector did not answer"))), 20_000)
    let id = 0
    const callCdp = (method: string, params: Record<string, unknown> = {}) =>
      new Promise<any>((ok) => {
        const mine = ++id
        const on = (data: WebSocket.RawData) => {
          const msg = JSON.parse(String(data))
          if (msg.id === mine) ws.off("message", on), ok(msg.result)
        }
        ws.on("message", on)
        ws.send(JSON.stringify({ id: mine, method, params }))
      })
    ws.on("error", reject)
    ws.on("open", async () => {
      for (let i = 0; i < 3; i++) await callCdp("HeapProfiler.collectGarbage")
      const r = await callCdp("Runtime.evaluate", { expression: "process.memoryUsage().heapUsed", returnByValue: true })
      clearTimeout(timer)
      ws.close()
      resolve(Number(r?.result?.value))
    })
  })

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`

let up: FakeUpstream
let corpus: ReturnType<typeof loadCorpus>
const inProcess = new Findings()
const spawned = new Findings()
const notes: Array<string> = []

beforeAll(async () => {
  // Lenient: a mutated request should reach the answer path too, not stop at the upstream's 400.
  up = await FakeUpstream.start({ strict: false })
  up.always({ chunks: 2 })
  corpus = loadCorpus(up.url)
})

afterAll(async () => {
  await up?.close()
  const all = new Findings()
  for (const f of [inProcess, spawned]) {
    for (const k of Object.keys(all.counts) as Array<keyof Findings["counts"]>) all.counts[k] += f.counts[k]
    for (const [s, v] of f.all) all.all.set(s, v)
  }
  // The reports went with the failed assertions; here what was measured, and the count.
  if (PROFILE)
    console.log(
      profile
        .sort((a, b) => b[0] - a[0])
        .slice(0, 25)
        .map(([ms, what]) => `${ms.toFixed(0)} ms ${what}`)
        .join("\n") + `\ntotal ${profile.reduce((n, [ms]) => n + ms, 0).toFixed(0)} ms in requests`
    )
  console.log([...notes, all.summary()].join("\n"))
})

describe("fuzz: random and mutated client traffic on every route of both planes", () => {
  it(`in-process gateway: ${RUNS} cases (seed ${SEED})`, {
    timeout: 60_000 + RUNS * 200 + (FULL_SWEEP ? 2_000 : 150) * 200
  }, async (ctx) => {
    const gw: TestGateway = await startGateway({ env: {} })
    // An uncaught exception would end a real gateway: record it as a crash of the case in flight.
    const crashes: Array<string> = []
    const onCrash = (e: unknown) => {
      crashes.push(e instanceof Error ? `${e.name}: ${e.message}\n${e.stack ?? ""}` : String(e))
      // The request that threw is never answered: stop waiting for it.
      setImmediate(() => abortInFlight())
    }
    const saved = { exception: process.listeners("uncaughtException"), rejection: process.listeners("unhandledRejection") }
    process.removeAllListeners("uncaughtException")
    process.removeAllListeners("unhandledRejection")
    process.on("uncaughtException", onCrash)
    process.on("unhandledRejection", onCrash)
    const findings = inProcess
    try {
      await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN_KEY })))
      await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: CLIENT_KEY })))
      for (const c of connections(up)) expect((await call(`${gw.url}/api/providers`, { body: c, headers: admin })).status).toBe(201)
      const gc = forceGc()
      let baseline = 0
      const warmup = Math.min(40, Math.floor(RUNS / 5))
      const one = async (raw: FuzzCase, index: number) => {
        const c = confine(raw, up.url)
        const seen = crashes.length
        const t0 = performance.now()
        const outcome = await send(gw.url, c)
        if (PROFILE)
          profile.push([performance.now() - t0, `${c.route} ${c.tags.filter((t) => !t.includes(":") || t.startsWith("frame:")).join(",")}`])
        // Crashes surface on the next turn of the event loop at the latest.
        await new Promise((r) => setImmediate(r))
        const cause = gw.logs
          .filter((l) => l.level === "ERROR")
          .map((l) => l.message)
          .join("\n")
          .slice(0, 1200)
        findings.record(index, c, judge(c, outcome, crashes.length > seen ? crashes.slice(seen).join("\n") : undefined, cause))
        if (c.kind === "http" && DIRTYING.test(c.route) && (outcome.status ?? 0) < 300) await restore(gw.url)
        await gw.resetResilience()
        gw.logs.length = 0
        up.requests.length = 0
        up.violations.length = 0
      }
      await runCases(SEED, RUNS, caseArb(corpus), async (raw, index) => {
        if (index === warmup) baseline = await settleHeap(gc)
        await one(raw, index)
      })
      // Then the sweep: every method of every route with a multi-MB body.
      let swept = 0
      for (const c of sweep(corpus)) await one(c, 50_000 + swept++)
      // A 502/503/504, hang or cut that does not show again was the machine's timing, not the case.
      await findings.confirm(async (c) => {
        const seen = crashes.length
        const o = await send(gw.url, c)
        await new Promise((r) => setImmediate(r))
        await gw.resetResilience()
        return judge(c, o, crashes.length > seen ? crashes.slice(seen).join("\n") : undefined)
      })
      notes.push(...findings.unconfirmed.map((u) => `in-process: ${u}`))
      // Smaller reproductions for the report (crashes included: here they are only recorded).
      await findings.shrink(async (c) => {
        const seen = crashes.length
        const o = await sendHttp(gw.url, c, DEADLINE_MS)
        await new Promise((r) => setImmediate(r))
        await gw.resetResilience()
        return judge(c, o, crashes.length > seen ? crashes.slice(seen).join("\n") : undefined)
      })
      // Idempotency keeps answers 5 s; then what is left is what the gateway holds on to.
      await new Promise((r) => setTimeout(r, 5_500))
      const after = await settleHeap(gc)
      notes.push(`in-process heap after a forced GC: ${mb(baseline)} after warm-up, ${mb(after)} after ${RUNS} cases`)
      expect.soft(after - baseline, `heap grew from ${mb(baseline)} to ${mb(after)}`).toBeLessThan(HEAP_MARGIN)
    } finally {
      ctx.task.meta.fuzz = { ...findings.counts }
      process.removeAllListeners("uncaughtException")
      process.removeAllListeners("unhandledRejection")
      for (const l of saved.exception) process.on("uncaughtException", l)
      for (const l of saved.rejection) process.on("unhandledRejection", l as never)
      await gw.close()
    }
    expect(findings.empty, findings.empty ? "" : findings.report(SEED, gw.url, findingsDir(SEED), "in-process")).toBe(true)
  })

  it(`spawned gateway process: ${PROCESS_RUNS} cases, alive after, heap back near its level`, {
    timeout: 120_000 + PROCESS_RUNS * 1000
  }, async (ctx) => {
    const dataDir = tempDir("gw-fuzz-")
    const setup = await runCli(["setup", "--non-interactive"], { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY })
    expect(setup.code, setup.stderr).toBe(0)
    await Effect.runPromise(
      Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: CLIENT_KEY })).pipe(Effect.provide(localCore(dataDir)))
    )
    // The inspector (on 127.0.0.1) lets the test force a GC in the process and read its heap.
    const start = () => startServerProcess({ DATA_DIR: dataDir, NODE_OPTIONS: "--inspect=127.0.0.1:0" })
    const inspectorOf = (p: ServerProcess) => /Debugger listening on (ws:\/\/127\.0\.0\.1:\d+\/[\w-]+)/.exec(p.output())?.[1]
    let server = await start()
    for (const c of connections(up)) expect((await call(`${server.url}/api/providers`, { body: c, headers: admin })).status).toBe(201)
    let exited: string | undefined
    const watch = (p: ServerProcess) =>
      p.child.once(
        "exit",
        (code, signal) => (exited = `gateway process exited (${code ?? signal}):\n${p.output().split("\n").slice(-12).join("\n")}`)
      )
    watch(server)
    let restarts = 0
    const findings = spawned
    /** Cases the process survived, replayed at the end to measure its heap (at most 300). */
    const survived: Array<FuzzCase> = []
    try {
      await runCases(SEED + 1, PROCESS_RUNS, caseArb(corpus), async (raw, index) => {
        const c = confine(raw, up.url)
        const logged = server.output().length
        const outcome = await send(server.url, c)
        // A process that dies takes a moment to be seen as dead.
        if (outcome.cut || outcome.hang) await new Promise((r) => setTimeout(r, 300))
        const cause = server
          .output()
          .slice(logged)
          .split("\n")
          .filter((l) => /"level":"(ERROR|FATAL)"|Error/.test(l))
          .join("\n")
          .slice(0, 1200)
        findings.record(100_000 + index, c, judge(c, outcome, exited, cause))
        if (exited) {
          // Go on with a fresh process on the same data; its heap is measured anew.
          exited = undefined
          restarts++
          server = await start()
          watch(server)
        } else {
          if (survived.length < 300 && !outcome.hang) survived.push(c)
          if (c.kind === "http" && DIRTYING.test(c.route) && (outcome.status ?? 0) < 300) await restore(server.url)
        }
        await call(`${server.url}/api/resilience/reset`, { body: { connections: true }, headers: admin })
      })
      expect(server.child.exitCode, "the gateway process is alive after the fuzz").toBeNull()
      await findings.confirm(async (c) => {
        const o = await send(server.url, c)
        if (o.cut || o.hang) await new Promise((r) => setTimeout(r, 300))
        if (exited) throw new Error(`the gateway died while replaying a finding: ${exited}`)
        await call(`${server.url}/api/resilience/reset`, { body: { connections: true }, headers: admin })
        return judge(c, o, undefined)
      })
      notes.push(...findings.unconfirmed.map((u) => `spawned process: ${u}`))
      // Smaller reproductions, but for crashes (each try would need a restart).
      await findings.shrink(
        async (c) => {
          const o = await sendHttp(server.url, c, DEADLINE_MS)
          await new Promise((r) => setTimeout(r, 100))
          if (exited) throw new Error(`the gateway died while shrinking a finding: ${exited}`)
          return judge(c, o, undefined)
        },
        ["crash", "reset"]
      )
      expect((await call(`${server.url}/api/health/ping`)).status).toBe(200)
      // The heap: the cases the process survived, once to warm up, then again; measured after each, after a forced GC.
      const replay = async () => {
        for (const c of survived) {
          await send(server.url, c)
          if (c.kind === "http" && DIRTYING.test(c.route)) await restore(server.url)
        }
        await new Promise((r) => setTimeout(r, 5_500))
        return remoteHeap(inspectorOf(server)!)
      }
      const baseline = await replay()
      const after = await replay()
      expect(server.child.exitCode, "the gateway process is alive after the replay").toBeNull()
      notes.push(
        `spawned process heap after a forced GC: ${mb(baseline)} after ${survived.length} cases replayed, ${mb(after)} after replaying them again (${restarts} restarts after crashes)`
      )
      expect.soft(after - baseline, `process heap grew from ${mb(baseline)} to ${mb(after)}`).toBeLessThan(HEAP_MARGIN)
    } finally {
      ctx.task.meta.fuzz = { ...findings.counts }
      await server.stop()
    }
    expect(findings.empty, findings.empty ? "" : findings.report(SEED, server.url, findingsDir(SEED), "process")).toBe(true)
  })
})
