import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { makeMemoryCluster, SharedState } from "../src/platform/state/SharedState.js"
import { INTERNAL_HEADER } from "../src/kernel/internalCall.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * The common path (docs/ARCHITECTURE.md, "The common path"; src/inference/commonPath.ts): which
 * requests take it (a test per reason of the rule, read from `gateway_requests_path_total`), and
 * that the gateway answers, books and shows the same traffic the same way with GATEWAY_COMMON_PATH
 * on and off (usage rows, answers, breakers, inspector entries).
 */
const ADMIN = "gwk_common_admin_key_0123456789abcdef"
const KEY = "gwk_common_client_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const client = { authorization: `Bearer ${KEY}` }

let up: FakeUpstream
let gw: TestGateway

const metrics = async (g: TestGateway = gw) => (await fetch(`${g.url}/metrics`, { headers: admin })).text()
/** The count of requests that took `path` for `reason` (the common path's own have reason ""). */
const taken = async (p: "common" | "pipeline", reason: string, g: TestGateway = gw): Promise<number> => {
  const line = (await metrics(g))
    .split("\n")
    .find((l) => l.startsWith("gateway_requests_path_total{") && l.includes(`path="${p}"`) && l.includes(`reason="${reason}"`))
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
}
const chat = (body: Record<string, unknown> = {}, headers: Record<string, string> = client, g: TestGateway = gw) =>
  call(`${g.url}/v1/chat/completions`, { body: { model: "up/m1", messages: [{ role: "user", content: "hi" }], ...body }, headers })
const responses = (body: Record<string, unknown> = {}, headers: Record<string, string> = client, g: TestGateway = gw) =>
  call(`${g.url}/v1/responses`, { body: { model: "up/m1", input: "hi", ...body }, headers })

/**
 * After a change to the database: the caches see it within the store's version check (1 s), and
 * the first request after that reads them again (through the pipeline, as `cold`). Tests that
 * count a request's path wait for both first.
 */
const settle = async (g: TestGateway = gw) => {
  await new Promise((r) => setTimeout(r, 1_100))
  await chat({}, admin, g)
}

/**
 * Sends until the request was not `cold`. The caches' version check is due again a second
 * after the last one, and the first request then reads through the pipeline (the rule's
 * first refusal): on a loaded machine a test's own steps between two requests can take that
 * second. A `cold` request counts under no other reason, so the counts stay exact.
 */
const notCold = async <A>(send: () => Promise<A>, g: TestGateway = gw): Promise<A> => {
  for (let attempt = 1; ; attempt++) {
    const cold = await taken("pipeline", "cold", g)
    const res = await send()
    if (attempt === 5 || (await taken("pipeline", "cold", g)) === cold) return res
  }
}

/** Sets (or clears) a flag, and lets the change settle. */
const setFlag = async (key: string, value: string | undefined, g: TestGateway = gw) => {
  expect(
    (
      await call(`${g.url}/api/settings/feature-flags`, {
        method: "PUT",
        body: value === undefined ? { key } : { key, value },
        headers: admin
      })
    ).status
  ).toBe(200)
  await settle(g)
}

beforeAll(async () => {
  up = await FakeUpstream.start()
  up.always({ content: "hello there", usage: { input: 7, output: 5 } })
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  const add = async (body: Record<string, unknown>) =>
    expect((await call(`${gw.url}/api/providers`, { body, headers: admin })).status).toBe(201)
  await add({ provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" })
  await add({ provider: "anthropic", name: "ant", apiKey: "sk-ant-upstream", baseUrl: up.baseUrl("anthropic"), defaultModel: "m1" })
  await add({ provider: "openai-compatible", name: "up2", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" })
  // Warm: the first request of each kind reads what was not in memory yet.
  await settle()
})

afterAll(async () => {
  await gw?.close()
  await up?.close()
})

describe("the rule: which requests take the common path", () => {
  const reasonOf = async <R extends { status: number; text: string }>(reason: string, send: () => Promise<R>, g: TestGateway = gw) => {
    const before = await taken("pipeline", reason, g)
    const res = await notCold(send, g)
    expect(await taken("pipeline", reason, g), `${reason}: ${res.status} ${res.text.slice(0, 300)}`).toBe(before + 1)
    return res
  }

  it("a plain chat completion and a plain message take it, streamed or not", async () => {
    const before = await taken("common", "")
    expect((await notCold(() => chat())).status).toBe(200)
    expect((await notCold(() => chat({ stream: true }))).status).toBe(200)
    const messages = await notCold(() =>
      call(`${gw.url}/v1/messages`, {
        body: { model: "ant/m1", max_tokens: 64, messages: [{ role: "user", content: "hi" }] },
        headers: client
      })
    )
    expect(messages.status, messages.text).toBe(200)
    // On a mismatch, every path's count says which way the missing request went.
    const paths = (await metrics(gw))
      .split("\n")
      .filter((l) => l.startsWith("gateway_requests_path_total{"))
      .join("; ")
    expect(await taken("common", ""), paths).toBe(before + 3)
  })

  it("a plain Responses request takes it, streamed or not, and one continuing a response the gateway answered", async () => {
    const before = await taken("common", "")
    const first = await notCold(() => responses())
    expect(first.status, first.text).toBe(200)
    const streamed = await notCold(() => responses({ model: "ant/m1", stream: true }))
    expect(streamed.status, streamed.text).toBe(200)
    const next = await notCold(() => responses({ input: "and then?", previous_response_id: first.body.id }))
    expect(next.status, next.text).toBe(200)
    expect(await taken("common", "")).toBe(before + 3)
    // The earlier turn went upstream with it, as the pipeline expands it.
    const sent = up.requests.at(-1)?.body.messages as Array<{ role: string; content: unknown }>
    expect(sent.map((m) => m.role)).toEqual(["user", "assistant", "user"])
  })

  it("mcp: a Responses request with mcp tools (the gateway's tool loop serves it)", async () => {
    await reasonOf("mcp", () =>
      responses({ tools: [{ type: "mcp", server_label: "nowhere", server_url: "http://127.0.0.1:1/mcp", require_approval: "never" }] })
    )
  })

  it("compaction: a Responses request with Codex's compaction trigger last in its input", async () => {
    const res = await reasonOf("compaction", () =>
      responses({ input: [{ type: "message", role: "user", content: "hi" }, { type: "compaction_trigger" }] })
    )
    expect(res.status, res.text).toBe(200)
  })

  it("previous_response: previous_response_id for a model whose answering connection is not known in memory", async () => {
    const res = await reasonOf("previous_response", () => responses({ model: "nobody/m1", previous_response_id: "resp_earlier" }))
    expect(res.status).toBe(404)
  })

  it("off: GATEWAY_COMMON_PATH=false sends every request through the pipeline", async () => {
    await setFlag("GATEWAY_COMMON_PATH", "false")
    try {
      expect((await reasonOf("off", () => chat())).status).toBe(200)
    } finally {
      await setFlag("GATEWAY_COMMON_PATH", undefined)
    }
  })

  it("route: a call the gateway makes to itself (a batch line)", async () => {
    await reasonOf("route", () => chat({}, { ...client, [INTERNAL_HEADER]: "not-the-secret" }))
  })

  it("idempotency: a request with Idempotency-Key (or X-Request-Id)", async () => {
    expect((await reasonOf("idempotency", () => chat({}, { ...client, "idempotency-key": `k-${Date.now()}` }))).status).toBe(200)
  })

  it("key: a key with inbound rate limits, and a key the gateway does not know when keys are required", async () => {
    const limited = await call(`${gw.url}/api/keys`, { body: { name: "limited", scopes: ["inference"], rpm: 1000 }, headers: admin })
    expect(limited.status, limited.text).toBe(201)
    await settle()
    expect((await reasonOf("key", () => chat({}, { authorization: `Bearer ${limited.body.secret}` }))).status).toBe(200)
    await setFlag("REQUIRE_API_KEY", "true")
    try {
      expect((await reasonOf("key", () => chat({}, { authorization: "Bearer gwk_nobody_0123456789" }))).status).toBe(401)
    } finally {
      await setFlag("REQUIRE_API_KEY", undefined)
    }
  })

  it("body: a body the route refuses gets the pipeline's 400", async () => {
    const res = await reasonOf("body", () =>
      call(`${gw.url}/v1/chat/completions`, { body: { model: "up/m1", messages: "not a list" }, headers: client })
    )
    expect(res.status).toBe(400)
  })

  it("cold: a change made by another process, not read into memory yet", async () => {
    // Another connection to the database commits: the caches are stale until the pipeline reads them again.
    await until(
      "a request found a cache not fresh",
      async () => {
        const before = await taken("pipeline", "cold")
        const db = new Database(path.join(gw.dataDir, "gateway.db"))
        try {
          db.prepare("INSERT OR REPLACE INTO kv (namespace, key, value, updated_at) VALUES ('test', 'cold', 'x', ?)").run(Date.now())
        } finally {
          db.close()
        }
        await new Promise((r) => setTimeout(r, 1_100))
        expect((await chat()).status).toBe(200)
        return (await taken("pipeline", "cold")) > before
      },
      10_000
    )
  })

  it("shared_limits: a key with a budget held across processes (a shared-state transport with exact totals); a key without one is admitted from memory", async () => {
    const cluster = makeMemoryCluster()
    const other = await startGateway({ sharedState: SharedState.layerCluster(cluster) })
    try {
      await other.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const budgeted = "gwk_common_budgeted_key_0123456789abcdef"
      const key = await other.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "budgeted" }, { secret: budgeted })))
      expect(
        (
          await call(`${other.url}/api/providers`, {
            body: { provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" },
            headers: admin
          })
        ).status
      ).toBe(201)
      expect((await call(`${other.url}/api/usage/budget`, { body: { apiKeyId: key.id, dailyLimitUsd: 100 }, headers: admin })).status).toBe(
        200
      )
      await settle(other)
      await chat({}, { authorization: `Bearer ${budgeted}` }, other)
      expect((await reasonOf("shared_limits", () => chat({}, { authorization: `Bearer ${budgeted}` }, other), other)).status).toBe(200)
      // No budget, no token limit: nothing to hold across processes, the common path.
      const before = await taken("common", "", other)
      expect((await notCold(() => chat({}, admin, other), other)).status).toBe(200)
      expect(await taken("common", "", other)).toBe(before + 1)
    } finally {
      await other.close()
    }
  })

  it("hooks: a guardrail that acts on the request (PII redaction of an address in it)", async () => {
    await setFlag("PII_REDACTION_ENABLED", "true")
    try {
      const before = await taken("common", "")
      // Nothing for it to redact: left alone, the request stays common.
      expect((await notCold(() => chat())).status).toBe(200)
      expect(await taken("common", "")).toBe(before + 1)
      expect((await reasonOf("hooks", () => chat({ messages: [{ role: "user", content: "write to jane.doe@example.com" }] }))).status).toBe(
        200
      )
    } finally {
      await setFlag("PII_REDACTION_ENABLED", undefined)
    }
  })

  it("progress: X-Gateway-Progress opens the answer early", async () => {
    expect((await reasonOf("progress", () => chat({ stream: true }, { ...client, "x-gateway-progress": "true" }))).status).toBe(200)
  })

  it("budget: a key whose budget is spent", async () => {
    const spent = await call(`${gw.url}/api/keys`, { body: { name: "spent", scopes: ["inference"] }, headers: admin })
    expect(spent.status).toBe(201)
    await settle()
    const asSpent = { authorization: `Bearer ${spent.body.secret}` }
    // Priced: the connection's model costs something, so the first answer spends the budget.
    const priced = await call(`${gw.url}/api/pricing`, {
      method: "PUT",
      body: { provider: "openai-compatible", model: "m1", input: 1000, output: 1000 },
      headers: admin
    })
    expect(priced.status, priced.text).toBeLessThan(300)
    await until("an answer is priced", async () => Number((await chat({}, asSpent)).headers.get("x-gateway-response-cost")) > 0, 5_000)
    // The budget starts from the key's usage rows: every one of them on disk first.
    await gw.usageWritten()
    expect(
      (await call(`${gw.url}/api/usage/budget`, { body: { apiKeyId: spent.body.id, dailyLimitUsd: 0.000001 }, headers: admin })).status
    ).toBe(200)
    await settle()
    expect((await reasonOf("budget", () => chat({}, asSpent))).status).toBe(429)
  })

  it("cache: a deterministic non-streamed request the response cache looks up", async () => {
    expect(
      (await reasonOf("cache", () => chat({ temperature: 0, messages: [{ role: "user", content: `cache ${Date.now()}` }] }))).status
    ).toBe(200)
  })

  it("plan: a fusion combo, or a model no connection serves", async () => {
    expect(
      (
        await call(`${gw.url}/api/combos`, {
          body: { name: "panel", strategy: "fusion", targets: [{ model: "up/m1" }, { model: "ant/m1" }] },
          headers: admin
        })
      ).status
    ).toBe(201)
    await settle()
    expect((await reasonOf("plan", () => chat({ model: "panel" }))).status).toBe(200)
    expect((await reasonOf("plan", () => chat({ model: "nobody/m1" }))).status).toBe(404)
  })

  it("hooks: a combo with a shadow target sends its own requests through the pipeline; the other models keep the common path", async () => {
    const combo = await call(`${gw.url}/api/combos`, {
      body: {
        name: "shadowed",
        strategy: "priority",
        targets: [{ model: "up/m1" }],
        config: { shadow: [{ model: "up2/m1", sampleRate: 1 }] }
      },
      headers: admin
    })
    expect(combo.status, combo.text).toBe(201)
    // The first shadow combo registers the sampling within a second (docs/shadow.md).
    await settle()
    await chat({ model: "shadowed" }, admin)
    try {
      expect((await reasonOf("hooks", () => chat({ model: "shadowed" }))).status).toBe(200)
      const before = await taken("common", "")
      expect((await notCold(() => chat())).status).toBe(200)
      expect(await taken("common", "")).toBe(before + 1)
    } finally {
      expect((await call(`${gw.url}/api/combos/shadowed`, { method: "DELETE", headers: admin })).status).toBeLessThan(300)
      await settle()
    }
  })

  it("a combo of the other strategies takes it: its first target answers, and a failure falls back to the next as on the pipeline", async () => {
    // Connections of its own: the failure below cools its first one down, not those of the other tests.
    for (const name of ["pairone", "pairtwo"])
      expect(
        (
          await call(`${gw.url}/api/providers`, {
            body: { provider: "openai-compatible", name, baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" },
            headers: admin
          })
        ).status
      ).toBe(201)
    expect(
      (
        await call(`${gw.url}/api/combos`, {
          body: { name: "pair", strategy: "priority", targets: [{ model: "pairone/m1" }, { model: "pairtwo/m1" }] },
          headers: admin
        })
      ).status
    ).toBe(201)
    await settle()
    // The first request of a combo reads the combos into memory (through the pipeline, as `plan`).
    await chat({ model: "pair" }, admin)
    const before = await taken("common", "")
    const res = await notCold(() => chat({ model: "pair" }))
    expect(res.status).toBe(200)
    expect(await taken("common", "")).toBe(before + 1)

    // The first target fails: the same dispatch goes on to the next (continueAfter), one fallback.
    let since = 0
    const fell = await notCold(async () => {
      // Again after a cold try: the pipeline fell back then, and cooled the first target down.
      await gw.resetResilience()
      up.next({ status: 503, errorMessage: "overloaded" })
      since = Date.now()
      return chat({ model: "pair", messages: [{ role: "user", content: `fallback ${since}` }] })
    })
    expect(fell.status, fell.text).toBe(200)
    expect(fell.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(await taken("common", "")).toBe(before + 2)
    await gw.usageWritten()
    const rows = queryDb<{ connection_id: string; fallback_attempts: number; requested_model: string }>(
      gw.dataDir,
      "SELECT connection_id, fallback_attempts, requested_model FROM usage WHERE ts >= ? AND endpoint = 'chat.completions'",
      since
    )
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ fallback_attempts: 1, requested_model: "pair" })
  })

  it("target: an answer held to a schema", async () => {
    const res = await reasonOf("target", () =>
      chat({
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "object", properties: { a: { type: "string" } } } }
        }
      })
    )
    expect(res.status).toBe(200)
  })

  it("bridge: a request with an image while a bridge model is configured; without one, the same request takes it", async () => {
    const image = {
      role: "user",
      content: [
        { type: "text", text: "what is this?" },
        { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }
      ]
    }
    const before = await taken("common", "")
    expect((await notCold(() => chat({ messages: [image] }))).status).toBe(200)
    expect(await taken("common", "")).toBe(before + 1)
    const bridge = (image: string | null) =>
      call(`${gw.url}/api/settings`, { method: "PATCH", body: { bridge: { image } }, headers: admin })
    expect((await bridge("up2/m1")).status).toBe(200)
    try {
      // The target takes images as far as the gateway knows (no capabilities declared): served as sent, through the pipeline.
      const res = await reasonOf("bridge", () => chat({ messages: [image] }))
      expect(res.status).toBe(200)
      expect(res.headers.get("x-gateway-bridge")).toBeNull()
      // A request without media still takes the common path.
      const plain = await taken("common", "")
      expect((await notCold(() => chat())).status).toBe(200)
      expect(await taken("common", "")).toBe(plain + 1)
    } finally {
      await bridge(null)
    }
  })
})

describe("the same traffic on both paths", () => {
  /** One mix of requests: whole and streamed, same format and translated, a failure, a fallback-free 5xx. */
  const mix = async (tag: string) => {
    const statuses: Array<number> = []
    const texts: Array<string> = []
    const send = async (p: string, body: Record<string, unknown>) => {
      const res = await call(`${gw.url}${p}`, { body, headers: client })
      statuses.push(res.status)
      texts.push(
        res.text.replace(/"(id|created|created_at)":\s*("[^"]*"|\d+)/g, "").replace(/(chatcmpl|msg|req|resp)[-_][A-Za-z0-9_-]+/g, "<id>")
      )
      return res
    }
    /** The id of a Responses answer, whole or streamed. */
    const responseId = (text: string) => /"id":"(resp_[^"]+)"/.exec(text)?.[1]
    const content = (s: string) => [{ role: "user", content: `${tag}: ${s}` }]
    await send("/v1/chat/completions", { model: "up/m1", messages: content("whole") })
    await send("/v1/chat/completions", { model: "up/m1", stream: true, messages: content("stream") })
    await send("/v1/chat/completions", { model: "ant/m1", messages: content("translated") })
    await send("/v1/chat/completions", { model: "ant/m1", stream: true, messages: content("translated stream") })
    await send("/v1/messages", { model: "ant/m1", max_tokens: 64, messages: content("messages") })
    await send("/v1/messages", { model: "up/m1", max_tokens: 64, stream: true, messages: content("messages to chat") })
    // Responses: whole and streamed, translated both ways, a chain of previous_response_id (the earlier turns sent upstream).
    const first = await send("/v1/responses", { model: "up/m1", input: `${tag}: responses` })
    const second = await send("/v1/responses", {
      model: "ant/m1",
      stream: true,
      input: `${tag}: responses stream`,
      previous_response_id: responseId(first.text)
    })
    texts.push(JSON.stringify(up.requests.at(-1)?.body.messages))
    await send("/v1/responses", { model: "up/m1", input: `${tag}: continued`, previous_response_id: responseId(second.text) })
    texts.push(JSON.stringify(up.requests.at(-1)?.body.messages))
    // Failures last, each on a connection of its own (a failure cools its connection down).
    up.next({ content: "cut short", chunks: 6, cutAfterChunks: 3 })
    await send("/v1/chat/completions", { model: "up/m1", stream: true, messages: content("cut") })
    up.next({ status: 503, errorMessage: "overloaded" })
    await send("/v1/chat/completions", { model: "up2/m1", messages: content("failed") })
    return { statuses, texts }
  }
  const rowsSince = async (ts: number) => {
    await gw.usageWritten()
    return queryDb(
      gw.dataDir,
      "SELECT api_key_id, connection_id, provider, model, endpoint, stream, status, tokens_in, tokens_out, error, cost_usd, fallback_attempts, cache_hit, requested_model FROM usage WHERE ts >= ? ORDER BY id",
      ts
    )
  }
  /** The inspector's entries of the requests since `since`, without what differs between any two requests (ids, times, sizes). */
  const inspected = async (since: number) => {
    const list = (await call(`${gw.url}/api/tools/traffic-inspector/requests?limit=1000`, { headers: admin })).body
    const summaries = (Array.isArray(list) ? list : (list.requests ?? list.entries ?? [])) as Array<Record<string, any>>
    const entries: Array<unknown> = []
    for (const s of summaries) {
      const e = (await call(`${gw.url}/api/tools/traffic-inspector/requests/${s.id}`, { headers: admin })).body
      if (e.timings?.startedAt < since || !String(e.path).startsWith("/v1/")) continue
      entries.push({
        method: e.method,
        path: e.path,
        status: e.status,
        detectedKind: e.detectedKind,
        error: e.error,
        llm: e.llm && {
          provider: e.llm.provider,
          model: e.llm.model,
          tokensIn: e.llm.tokensIn,
          tokensOut: e.llm.tokensOut,
          streamed: e.llm.streamed
        }
      })
    }
    return entries
  }

  it("answers, usage rows, breakers and inspector entries are the same with GATEWAY_COMMON_PATH on and off", async () => {
    await gw.resetResilience()
    const t1 = Date.now()
    const on = await mix("same")
    const rowsOn = await rowsSince(t1)
    const entriesOn = await inspected(t1)
    const breakersOn = (await call(`${gw.url}/api/resilience`, { headers: admin })).body.breakers
    expect(await taken("common", "")).toBeGreaterThan(0)

    await setFlag("GATEWAY_COMMON_PATH", "false")
    await gw.resetResilience()
    try {
      const t2 = Date.now()
      const off = await mix("same")
      const rowsOff = await rowsSince(t2)
      const entriesOff = await inspected(t2)
      const breakersOff = (await call(`${gw.url}/api/resilience`, { headers: admin })).body.breakers
      expect(on.statuses).toEqual(off.statuses)
      for (let i = 0; i < on.texts.length; i++) expect(on.texts[i], `request ${i}`).toBe(off.texts[i])
      expect(rowsOff).toEqual(rowsOn)
      expect(rowsOn).toHaveLength(11)
      expect(entriesOff).toEqual(entriesOn)
      expect(breakersOff.map((b: any) => ({ key: b.key, state: b.state, failures: b.consecutiveFailures ?? b.failures }))).toEqual(
        breakersOn.map((b: any) => ({ key: b.key, state: b.state, failures: b.consecutiveFailures ?? b.failures }))
      )
    } finally {
      await setFlag("GATEWAY_COMMON_PATH", undefined)
    }
  })
})
