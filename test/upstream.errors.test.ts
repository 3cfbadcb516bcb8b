import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { redactText, scrubSecrets } from "../src/kernel/redact.js"
import { EventBus, type GatewayEvent } from "../src/platform/events/EventBus.js"
import { Cooldowns } from "../src/services/resilience/Cooldowns.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Upstream error answers, read once and the same everywhere: a provider key an upstream echoes
 * in its error never reaches the client, the usage table, the connection's lastError, the
 * events or the log; every error status and code is the one docs/errors.md lists.
 */
const ADMIN = "gwk_uperr_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
/** Key-shaped: caught by the patterns too. */
const SHAPED = "sk-upstream-secret-123456"
/** Shaped like nothing: only the connection's own key, matched literally, catches it. */
const OPAQUE = "Zq8vR2mN4pL7xK1wT5yB9cD3opaque"
const SECRETS = [SHAPED, OPAQUE]

let gw: TestGateway
/** openai-compatible, key SHAPED: chat clients are passed through. */
let leaky: FakeUpstream
/** anthropic, key OPAQUE: chat clients are translated. */
let opaque: FakeUpstream
let steady: FakeUpstream
const events: Array<GatewayEvent> = []

const chat = (model: string, stream = false) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, stream, messages: [{ role: "user", content: "hi" }] } })

/** The request's usage rows, once every request has written its own. */
const usageRows = async (requestId: string | null) => {
  await gw.usageWritten()
  return queryDb(gw.dataDir, "SELECT status, error FROM usage WHERE request_id = ?", requestId)
}

/** Every place an error is kept or shown, as one text: none may hold a key. */
const everywhere = async (res: { text: string; headers: Headers }) => {
  const rows = await usageRows(res.headers.get("x-gateway-request-id"))
  const row = rows[0] ?? {}
  const providers = await call(`${gw.url}/api/providers`, { headers: admin })
  await gw.run(Effect.flatMap(Cooldowns, (c) => c.flush))
  await gw.usageWritten()
  const stored = queryDb(gw.dataDir, "SELECT name, last_error FROM connections")
  const logs = gw.logs.map((l) => `${l.message} ${JSON.stringify(l.annotations)}`).join("\n")
  return {
    rows,
    row,
    providers: providers.body,
    all: [res.text, JSON.stringify(rows), providers.text, JSON.stringify(stored), JSON.stringify(events), logs].join("\n")
  }
}

const expectNoSecret = (text: string) => {
  for (const s of SECRETS) {
    expect(text).not.toContain(s)
    expect(text).not.toContain(encodeURIComponent(s))
  }
}

beforeAll(async () => {
  leaky = await FakeUpstream.start()
  opaque = await FakeUpstream.start()
  steady = await FakeUpstream.start()
  gw = await startGateway({ timeouts: { headersMs: 2000, streamHeadersMs: 2000, firstContentMs: 2000, idleMs: 2000 } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect(
    (await add({ provider: "openai-compatible", name: "leaky", apiKey: SHAPED, baseUrl: leaky.baseUrl("openai-chat"), defaultModel: "m1" }))
      .status
  ).toBe(201)
  expect(
    (await add({ provider: "anthropic", name: "opaque", apiKey: OPAQUE, baseUrl: opaque.baseUrl("anthropic"), defaultModel: "m1" })).status
  ).toBe(201)
  expect(
    (
      await add({
        provider: "anthropic",
        name: "steady",
        apiKey: "sk-ant-steady-0000",
        baseUrl: steady.baseUrl("anthropic"),
        defaultModel: "m1"
      })
    ).status
  ).toBe(201)
  expect(
    (
      await call(`${gw.url}/api/combos`, {
        body: { name: "redirect-pair", strategy: "priority", targets: [{ model: "leaky/m1" }, { model: "steady/m1" }] },
        headers: admin
      })
    ).status
  ).toBe(201)
  gw.runtime.runFork(
    Effect.scoped(
      Effect.gen(function* () {
        const q = yield* (yield* EventBus).subscribe
        for (;;) events.push(yield* Queue.take(q))
      })
    )
  )
})
afterAll(async () => {
  await gw?.close()
  await leaky?.close()
  await opaque?.close()
  await steady?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  for (const up of [leaky, opaque, steady]) {
    up.always({ content: "fine" })
    up.requests.length = 0
  }
  events.length = 0
  gw.logs.length = 0
})

describe("a provider key echoed in an upstream error", () => {
  const targets = [
    { name: "leaky", secret: SHAPED, how: "passed through" },
    { name: "opaque", secret: OPAQUE, how: "translated" }
  ] as const
  const bodies = (secret: string) =>
    [
      {
        kind: "JSON",
        body: { error: { message: `Incorrect API key provided: ${secret}`, type: "invalid_request_error", code: "invalid_api_key" } }
      },
      {
        kind: "JSON with the key elsewhere",
        body: {
          type: "error",
          error: { type: "authentication_error", message: "invalid x-api-key" },
          key: secret,
          echo: { headers: { authorization: `Bearer ${secret}` } }
        }
      },
      { kind: "text/plain", body: `bad key ${secret} (url-encoded: ${encodeURIComponent(secret)})` }
    ] as const

  for (const target of targets) {
    for (const status of [401, 400, 500]) {
      for (const { kind, body } of bodies(target.secret)) {
        it(`${status} ${kind}, ${target.how}: not in the answer, the usage row, lastError, events or logs`, async () => {
          const up = target.name === "leaky" ? leaky : opaque
          up.always({ status, body })
          const res = await chat(`${target.name}/m1`)
          // An upstream's 500 reaches the client as 502 (a 500 from the gateway is its own defect), the original in a header.
          expect(res.status).toBe(status === 500 ? 502 : status)
          expect(res.headers.get("x-gateway-upstream-status")).toBe(String(status))
          expect(res.text.length).toBeGreaterThan(0)
          const { rows, row, providers, all } = await everywhere(res)
          expectNoSecret(all)
          expect(rows).toHaveLength(1)
          expect(row["error"]).toBeTruthy()
          // The error still says what went wrong.
          if (kind !== "JSON with the key elsewhere") expect(res.text).toMatch(/Incorrect API key provided|bad key/)
          if (status === 401) {
            const conn = providers.connections.find((c: any) => c.name === target.name)
            expect(conn.lastError).toBeTruthy()
          }
        })
      }
    }

    it(`a stream's error event before any content, ${target.how}`, async () => {
      const up = target.name === "leaky" ? leaky : opaque
      up.always({ content: "never", streamErrorAfterChunks: 0, errorMessage: `Incorrect API key provided: ${target.secret}` })
      const res = await chat(`${target.name}/m1`, true)
      expect(res.status).toBeGreaterThanOrEqual(400)
      expect(res.text).toContain("Incorrect API key provided")
      expectNoSecret((await everywhere(res)).all)
    })

    it(`a stream's error event mid-stream, ${target.how}`, async () => {
      const up = target.name === "leaky" ? leaky : opaque
      up.always({
        content: "one two three four",
        chunks: 4,
        streamErrorAfterChunks: 4,
        errorMessage: `Incorrect API key provided: ${target.secret}`
      })
      const res = await chat(`${target.name}/m1`, true)
      expect(res.status).toBe(200)
      expect(res.text).toContain("Incorrect API key provided")
      const { row, all } = await everywhere(res)
      expectNoSecret(all)
      expect(row["error"]).toContain("Incorrect API key provided")
    })
  }

  it("the provider test records no key (JSON and text answers)", async () => {
    for (const body of [{ error: { message: `Incorrect API key provided: ${OPAQUE}` } }, `bad key ${OPAQUE}`]) {
      opaque.next({ status: 401, body })
      const res = await call(`${gw.url}/api/providers/opaque/test`, { method: "POST", headers: admin })
      expect(res.status).toBe(200)
      expect(res.body.ok).toBe(false)
      expect(res.body.error).toMatch(/Incorrect API key provided|bad key/)
      expectNoSecret((await everywhere(res)).all)
    }
  })

  it("provider validation answers no key either", async () => {
    opaque.next({ status: 401, body: `bad key ${OPAQUE}` })
    const res = await call(`${gw.url}/api/providers/validate`, {
      body: { provider: "anthropic", apiKey: OPAQUE, baseUrl: opaque.baseUrl("anthropic") },
      headers: admin
    })
    expect(res.body.ok).toBe(false)
    expect(res.body.error).toContain("bad key")
    expectNoSecret(res.text)
  })

  it("a successful answer that mentions the key is left alone (only errors are scrubbed)", async () => {
    leaky.always({ content: `your key is ${SHAPED}` })
    const res = await chat("leaky/m1")
    expect(res.status).toBe(200)
    expect(res.text).toContain(SHAPED)
  })
})

describe("error statuses and codes", () => {
  it("an upstream redirect is a 502 upstream_error naming the location without the key, and falls back", async () => {
    leaky.always({ status: 302, headers: { location: `https://elsewhere.invalid/v1/chat?key=${SHAPED}&x=1` }, body: "" })
    const direct = await chat("leaky/m1")
    expect(direct.status).toBe(502)
    expect(direct.body.error.type).toBe("upstream_error")
    expect(direct.body.error.code).toBe("upstream_redirect")
    expect(direct.body.error.message).toContain("redirected")
    expect(direct.body.error.message).toContain("https://elsewhere.invalid/v1/chat")
    expect(direct.headers.get("location")).toBeNull()
    const { row, all } = await everywhere(direct)
    expectNoSecret(all)
    expect(row["status"]).toBe(502)
    expect(steady.requests).toHaveLength(0)

    await gw.resetResilience()
    const viaCombo = await chat("redirect-pair")
    expect(viaCombo.status).toBe(200)
    expect(viaCombo.text).toContain("fine")
    expect(viaCombo.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(steady.requests).toHaveLength(1)
  })

  it("a 200 with an error body is 502 whole and streamed, in every family that sends one", async () => {
    for (const [model, up] of [
      ["leaky/m1", leaky],
      ["opaque/m1", opaque]
    ] as const) {
      for (const stream of [false, true]) {
        up.next({ errorIn200: true, errorMessage: "broken inside" })
        const res = await chat(model, stream)
        expect(res.status, `${model} stream=${stream}: ${res.text}`).toBe(502)
        expect(res.body.error.type).toBe("upstream_error")
        expect(res.body.error.message).toContain("broken inside")
        // That failure cooled the connection down: forget it for the next request.
        await gw.resetResilience()
        // A stream whose first event is an error is the same thing.
        up.next({ content: "never", streamErrorAfterChunks: 0, errorMessage: "broken first" })
        const first = await chat(model, true)
        expect(first.status, `${model} stream first event: ${first.text}`).toBe(502)
        expect(first.body.error.type).toBe("upstream_error")
        expect(first.body.error.message).toContain("broken first")
        await gw.resetResilience()
      }
    }
  })

  it("an answer nested too deep to walk is a 502 of that target, and a combo falls back", async () => {
    const deep = "[".repeat(5000) + "]".repeat(5000)
    const body = `{"id":"x","object":"chat.completion","model":"m1","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"deep"}}],"extra":${deep}}`
    leaky.always({ body, headers: { "content-type": "application/json" } })
    for (const stream of [false, true]) {
      const direct = await chat("leaky/m1", stream)
      expect(direct.status, direct.text.slice(0, 300)).toBe(502)
      expect(direct.body.error.message).toContain("nested deeper than 128 levels")
      await gw.resetResilience()
      const viaCombo = await chat("redirect-pair", stream)
      expect(viaCombo.status, viaCombo.text.slice(0, 300)).toBe(200)
      expect(viaCombo.headers.get("x-gateway-fallback-attempts")).toBe("1")
      await gw.resetResilience()
    }
  })

  it("an error answer nested too deep is read as text: the client gets the upstream's status, not a reset or a 500", async () => {
    const deep = "[".repeat(5000) + "]".repeat(5000)
    leaky.always({
      status: 400,
      body: `{"error":{"message":"bad","type":"invalid_request_error","detail":${deep}}}`,
      headers: { "content-type": "application/json" }
    })
    const res = await chat("leaky/m1")
    expect(res.status, res.text.slice(0, 300)).toBe(400)
    expect(res.body.error.type).toBe("invalid_request_error")
  })

  it("an upstream that breaks off mid-stream ends the stream with a stream_interrupted error event", async () => {
    for (const model of ["leaky/m1", "opaque/m1"]) {
      const up = model === "leaky/m1" ? leaky : opaque
      up.next({ content: "one two three four five six", chunks: 6, cutAfterChunks: 5 })
      const res = await chat(model, true)
      expect(res.status).toBe(200)
      expect(res.text).not.toContain("[DONE]")
      const last = res.text
        .split("\n")
        .filter((l) => l.startsWith("data: "))
        .at(-1)!
      const error = JSON.parse(last.slice(6)).error
      expect(error.code, model).toBe("stream_interrupted")
      expect(error.type).toBe("upstream_error")
      await gw.resetResilience()
    }
  })

  it("a stream cut before any content is a 502 stream_interrupted (nothing was sent yet)", async () => {
    leaky.next({ content: "never", cutAfterChunks: 0 })
    const res = await chat("leaky/m1", true)
    expect(res.status).toBe(502)
    expect(res.body.error).toMatchObject({ type: "upstream_error", code: "stream_interrupted" })
  })
})

describe("scrubSecrets", () => {
  it("removes a secret in every form it may be echoed in, and pieces of it", () => {
    const secret = 'Zq8vR2mN4pL7"xK1wT5y/B9cD3'
    const plain = "Zq8vR2mN4pL7xK1wT5yB9cD3opaque"
    const echoed = [
      secret,
      encodeURIComponent(secret),
      JSON.stringify(secret).slice(1, -1),
      Buffer.from(secret).toString("base64"),
      plain.slice(0, 14),
      plain.slice(-13)
    ]
    for (const form of echoed) {
      const out = scrubSecrets(`the key ${form} was refused`, [secret, plain])
      expect(out, form).not.toContain(form)
      expect(out).toContain("the key ")
      expect(out).toContain(" was refused")
    }
  })

  it("leaves ordinary text alone, and ignores secrets too short to search for", () => {
    expect(scrubSecrets("Incorrect API key provided; password: expected string", ["abc"])).toBe(
      "Incorrect API key provided; password: expected string"
    )
    expect(redactText("messages: bad role")).toBe("messages: bad role")
  })

  it("masks key-shaped text it was not told about", () => {
    for (const key of [
      "sk-proj-abcdef123456",
      "ghp_abcdefghijklmnop1234",
      "hf_abcdefghijklmnop12",
      "AKIAABCDEFGHIJKLMNOP",
      "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    ]) {
      expect(scrubSecrets(`token ${key} rejected`, []), key).not.toContain(key)
    }
    expect(scrubSecrets("x-api-key: 12345678abcdefgh", [])).toBe("x-api-key: ****")
    // A pattern without a group (the replacer's second argument is then an offset).
    expect(redactText("a Google key: xx AIzaSyA1234567890abcdefghijklmnop")).not.toContain("AIzaSyA1234567890abcdefghijklmnop")
  })
})
