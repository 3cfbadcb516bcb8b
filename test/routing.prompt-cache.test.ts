import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { CircuitBreakers } from "../src/services/resilience/CircuitBreakers.js"
import { Cooldowns } from "../src/services/resilience/Cooldowns.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream, type Recorded } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Prompt-cache affinity (docs/routing.md): a conversation that sends no session id stays on the
 * account whose prompt cache holds its prefix, even when a higher-priority account comes back from
 * its cooldown, unless the warm account fails. Each fake upstream keeps a prompt cache as a
 * provider does: a prefix it served before is answered with 900 of its 1,000 input tokens cached.
 */
const ADMIN = "gwk_prompt_cache_admin_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
const ups: Record<"a" | "b", FakeUpstream> = {} as never
const seen: Record<"a" | "b", Set<string>> = { a: new Set(), b: new Set() }

/** An upstream that answers with its name and caches the prefix (system prompt and first message) of what it served. */
const caching = (name: "a" | "b") => (r: Recorded) => {
  const prefix = JSON.stringify(r.body?.messages?.slice(0, 2))
  const warm = seen[name].has(prefix)
  seen[name].add(prefix)
  return {
    body: {
      id: `chatcmpl-${name}`,
      object: "chat.completion",
      created: 1,
      model: r.body?.model ?? "m1",
      choices: [{ index: 0, message: { role: "assistant", content: `answer from ${name}` }, finish_reason: "stop" }],
      usage: { prompt_tokens: 1000, completion_tokens: 10, total_tokens: 1010, prompt_tokens_details: { cached_tokens: warm ? 900 : 0 } }
    }
  }
}

const client = () => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: ADMIN, maxRetries: 0 })

/** A conversation: the same system prompt and first message, one more turn each time. */
const conversation = (topic: string) => {
  const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [
    { role: "system", content: `You review ${topic}.` },
    { role: "user", content: `Here is a long ${topic} to review.` }
  ]
  return async (model: string) => {
    const { data, response } = await client().chat.completions.create({ model, messages }).withResponse()
    messages.push({ role: "assistant", content: data.choices[0]!.message.content ?? "" }, { role: "user", content: "and then?" })
    return { by: data.choices[0]!.message.content, cached: data.usage?.prompt_tokens_details?.cached_tokens ?? 0, response }
  }
}

/** The cooldown of an account ends (as its retry-after passes); the routing memory stays. */
const cooldownsEnd = () =>
  gw.run(
    Effect.gen(function* () {
      yield* (yield* Cooldowns).reset()
      yield* (yield* CircuitBreakers).reset()
    })
  )

const createCombo = (body: Record<string, unknown>) => call(`${gw.url}/api/combos`, { body, headers: admin })

beforeAll(async () => {
  for (const name of ["a", "b"] as const) ups[name] = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  for (const name of ["a", "b"] as const) {
    const res = await call(`${gw.url}/api/providers`, {
      body: {
        provider: "openai-compatible",
        name: `acct-${name}`,
        baseUrl: ups[name].baseUrl("openai-chat"),
        defaultModel: "m1",
        models: ["m1"]
      },
      headers: admin
    })
    expect(res.status).toBe(201)
  }
})
afterAll(async () => {
  await gw?.close()
  for (const up of Object.values(ups)) await up?.close()
})
beforeEach(async () => {
  for (const name of ["a", "b"] as const) {
    ups[name].script(caching(name))
    ups[name].requests.length = 0
    seen[name].clear()
  }
  await gw.resetResilience()
  const list = await call(`${gw.url}/api/combos`, { headers: admin })
  for (const c of list.body.combos) await call(`${gw.url}/api/combos/${c.id}`, { method: "DELETE", headers: admin })
})

describe("prompt-cache affinity", () => {
  it("keeps a conversation without a session id on the warm account after the preferred one comes back from its cooldown", async () => {
    expect(
      (await createCombo({ name: "accounts", strategy: "priority", targets: [{ model: "acct-a/m1" }, { model: "acct-b/m1" }] })).status
    ).toBe(201)
    const turn = conversation("pull request")
    // a is out of quota when the conversation starts: it goes to b, whose cache then holds its prefix.
    ups.a.next({ status: 429, headers: { "retry-after": "1" }, errorMessage: "rate limited" })
    expect(await turn("accounts")).toMatchObject({ by: "answer from b", cached: 0 })
    expect(await turn("accounts")).toMatchObject({ by: "answer from b", cached: 900 })
    await cooldownsEnd()
    // a is back and first in the combo's order, but the conversation's cache is warm on b.
    const after = [await turn("accounts"), await turn("accounts"), await turn("accounts")]
    expect(after.map((t) => t.by)).toEqual(["answer from b", "answer from b", "answer from b"])
    expect(ups.a.requests).toHaveLength(1)
    // Another conversation is not held by this one's warmth: it starts on a.
    expect((await conversation("design document")("accounts")).by).toBe("answer from a")

    // The usage rows show the cached share held across the recovery: 900 of every 1,000 input tokens.
    await gw.usageWritten()
    const rows = queryDb<{ tokens_in: number; tokens_cached: number | null }>(
      gw.dataDir,
      "SELECT tokens_in, tokens_cached FROM usage WHERE requested_model = 'accounts' AND provider IS NOT NULL ORDER BY rowid"
    ).slice(1, 5)
    expect(rows.reduce((n, r) => n + (r.tokens_cached ?? 0), 0) / rows.reduce((n, r) => n + r.tokens_in, 0)).toBe(0.9)
    // The usage history says it per connection, requested model (the combo) and key: 3,600 of b's 5,000 input tokens.
    const history = async (groupBy: string) =>
      (await call(`${gw.url}/api/usage/history?from=0&groupBy=${groupBy}`, { headers: admin })).body.rows as Array<any>
    const b = (await call(`${gw.url}/api/providers`, { headers: admin })).body.connections.find((c: any) => c.name === "acct-b")
    expect((await history("connection")).find((r) => r.key === b.id)).toMatchObject({
      tokensIn: 5000,
      tokensCached: 3600,
      cachedInputRatio: 0.72
    })
    expect((await history("requestedModel")).find((r) => r.key === "accounts")).toMatchObject({ tokensIn: 6000, cachedInputRatio: 0.6 })
  })

  it("without affinity (the combo turns it off) the conversation goes back to the preferred account, where its cache is cold", async () => {
    await createCombo({
      name: "accounts",
      strategy: "priority",
      targets: [{ model: "acct-a/m1" }, { model: "acct-b/m1" }],
      config: { promptCacheAffinity: false }
    })
    const turn = conversation("pull request")
    ups.a.next({ status: 429, headers: { "retry-after": "1" }, errorMessage: "rate limited" })
    expect((await turn("accounts")).by).toBe("answer from b")
    expect((await turn("accounts")).cached).toBe(900)
    await cooldownsEnd()
    expect(await turn("accounts")).toMatchObject({ by: "answer from a", cached: 0 })
  })

  it("the warm account failing moves the conversation, and it then stays where it went", async () => {
    await createCombo({ name: "accounts", strategy: "priority", targets: [{ model: "acct-a/m1" }, { model: "acct-b/m1" }] })
    const turn = conversation("pull request")
    ups.a.next({ status: 429, headers: { "retry-after": "1" }, errorMessage: "rate limited" })
    expect((await turn("accounts")).by).toBe("answer from b")
    await cooldownsEnd()
    expect((await turn("accounts")).by).toBe("answer from b")
    ups.b.next({ status: 503, errorMessage: "overloaded" })
    expect((await turn("accounts")).by).toBe("answer from a")
    await cooldownsEnd()
    expect((await turn("accounts")).by).toBe("answer from a")
  })

  it("a spreading strategy keeps spreading unless the combo asks for affinity", async () => {
    await createCombo({ name: "rr", strategy: "round-robin", targets: [{ model: "acct-a/m1" }, { model: "acct-b/m1" }] })
    const spread = conversation("pull request")
    const by = new Set([(await spread("rr")).by, (await spread("rr")).by])
    expect(by.size).toBe(2)
    await createCombo({
      name: "rr-warm",
      strategy: "round-robin",
      targets: [{ model: "acct-a/m1" }, { model: "acct-b/m1" }],
      config: { promptCacheAffinity: true }
    })
    const held = conversation("design document")
    const first = (await held("rr-warm")).by
    expect([(await held("rr-warm")).by, (await held("rr-warm")).by, (await held("rr-warm")).by]).toEqual([first, first, first])
  })

  it("a model served by two accounts (a bare model id): the conversation stays on the account that served it", async () => {
    const turn = conversation("changelog")
    ups.a.next({ status: 429, headers: { "retry-after": "1" }, errorMessage: "rate limited" })
    expect((await turn("m1")).by).toBe("answer from b")
    await cooldownsEnd()
    expect([(await turn("m1")).by, (await turn("m1")).by]).toEqual(["answer from b", "answer from b"])
    // A conversation of its own starts on the first account.
    expect((await conversation("release notes")("m1")).by).toBe("answer from a")
  })

  it("/metrics counts input and cached input tokens by connection, requested model and key", async () => {
    await createCombo({ name: "accounts", strategy: "priority", targets: [{ model: "acct-a/m1" }, { model: "acct-b/m1" }] })
    const turn = conversation("metrics")
    await turn("accounts")
    await turn("accounts")
    await gw.usageWritten()
    const text = (await call(`${gw.url}/metrics`, { headers: admin })).text
    const series = (type: string) =>
      text
        .split("\n")
        .filter(
          (l) =>
            l.startsWith("gateway_prompt_cache_input_tokens_total{") &&
            l.includes('requested_model="accounts"') &&
            l.includes(`type="${type}"`)
        )
        .map((l) => Number(l.slice(l.lastIndexOf(" ") + 1)))
    expect(series("input").reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(2000)
    expect(series("cached").reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(900)
  })

  it("a client session id still decides where the conversation goes (the session is sticky, as before)", async () => {
    await createCombo({ name: "accounts", strategy: "priority", targets: [{ model: "acct-a/m1" }, { model: "acct-b/m1" }] })
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "accounts", messages: [{ role: "user", content: "hi" }] },
      headers: { ...admin, "x-session-id": "my-session" }
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-gateway-session-id")).toBe("my-session")
  })
})
