import Anthropic from "@anthropic-ai/sdk"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { buildDispatcher } from "../src/upstream/egress/dispatcher.js"
import { ProxyFamilyUnavailable, proxyUrl, withFamilyMarker } from "../src/upstream/egress/family.js"
import type { ResolvedAddress } from "../src/upstream/client/egressGuard.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { dualStack, httpProxy, socksProxy, type TestProxy } from "./support/proxies.js"

/**
 * The egress family policy, one test per numbered rule of spec document 2 ("Egress family
 * policy behavior"), with real proxies on 127.0.0.1 and ::1 and a resolver the test controls:
 * `proxy.test`-style names answer what the test says (or fail), and nothing leaves loopback.
 */
const ADMIN = "gwk_family_admin_key_0123456789abcdefghij"
const admin = { authorization: `Bearer ${ADMIN}` }
const PROXIES = `/api/v1/management/proxies`

const records = new Map<string, ReadonlyArray<string>>()
const resolve = async (name: string): Promise<ReadonlyArray<ResolvedAddress>> => {
  const list = records.get(name)
  if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: "ENOTFOUND" })
  return list.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }))
}

const fake = fakeOpenAIForFile()
let gw: TestGateway
let dual: Awaited<ReturnType<typeof dualStack>>
let socksDual: Awaited<ReturnType<typeof dualStack>>
let openai: OpenAI
let anthropic: Anthropic

let n = 0
const proxyAndConnection = async (proxy: Record<string, unknown>) => {
  const p = await call(`${gw.url}${PROXIES}`, { body: { name: `p${++n}`, ...proxy }, headers: admin })
  expect(p.status, p.text).toBe(201)
  const c = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: `fam${n}`, baseUrl: fake.upstream.baseUrl, defaultModel: "m1", proxyId: p.body.id },
    headers: admin
  })
  expect(c.status, c.text).toBe(201)
  return { proxy: p.body as { id: string; url: string }, name: c.body.name as string }
}
const chat = (name: string, stream = false) =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model: `${name}/m1`, stream, messages: [{ role: "user", content: "hi" }] },
    headers: admin
  })
const passedSince = (p: TestProxy, before: number) => p.passed.slice(before)

beforeAll(async () => {
  dual = await dualStack((host, port) => httpProxy(host, undefined, port))
  socksDual = await dualStack((host, port) => socksProxy(host, undefined, port))
  gw = await startGateway({ dns: resolve })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: ADMIN, maxRetries: 0 })
  anthropic = new Anthropic({ baseURL: gw.url, apiKey: ADMIN, maxRetries: 0 })
})

afterAll(async () => {
  await gw?.close()
  await dual?.close()
  await socksDual?.close()
})

beforeEach(async () => {
  fake.upstream.always({ content: "pinned", chunks: 2 })
  records.clear()
  await gw.resetResilience()
})

describe("rule 1: auto", () => {
  it("uses the proxy URL unchanged (no marker) and connects in the family of an IP literal", async () => {
    const v6 = await proxyAndConnection({ type: "http", host: "::1", port: dual.port })
    expect(v6.proxy.url).toBe(`http://[::1]:${dual.port}/`)
    const before = dual.v6.passed.length
    expect((await chat(v6.name)).status).toBe(200)
    expect(passedSince(dual.v6, before).map((p) => p.family)).toEqual(["IPv6"])

    const v4 = await proxyAndConnection({ type: "http", host: "127.0.0.1", port: dual.port })
    expect(v4.proxy.url).toBe(`http://127.0.0.1:${dual.port}/`)
    const before4 = dual.v4.passed.length
    expect((await chat(v4.name)).status).toBe(200)
    expect(passedSince(dual.v4, before4).map((p) => p.family)).toEqual(["IPv4"])
  })

  it("a host name uses ordinary resolution: no pre-flight refusal for a name with only one family", async () => {
    records.set("only6.proxy.test", ["::1"])
    const c = await proxyAndConnection({ type: "http", host: "only6.proxy.test", port: dual.port })
    expect((await chat(c.name)).status).toBe(200)
  })
})

describe("rule 2: ipv4/ipv6 append the marker once and pin the family with no fallback", () => {
  it("appends family=<value> exactly once to the normalised URL, also when the family is set again or the URL already has one", async () => {
    records.set("both.proxy.test", ["127.0.0.1", "::1"])
    const c = await proxyAndConnection({ type: "http", host: "both.proxy.test", port: dual.port, family: "ipv4" })
    expect(c.proxy.url).toBe(`http://both.proxy.test:${dual.port}/?family=ipv4`)
    const again = await call(`${gw.url}${PROXIES}/${c.proxy.id}`, { method: "PATCH", body: { family: "ipv4" }, headers: admin })
    expect(again.body.url.match(/family=/g)).toHaveLength(1)
    const six = await call(`${gw.url}${PROXIES}/${c.proxy.id}`, { method: "PATCH", body: { family: "ipv6" }, headers: admin })
    expect(six.body.url).toBe(`http://both.proxy.test:${dual.port}/?family=ipv6`)
    expect(withFamilyMarker("socks5://h:1080/?family=ipv6", "ipv6")).toBe("socks5://h:1080/?family=ipv6")
    expect(proxyUrl({ type: "socks5", host: "::1", port: 1080, username: null, password: null, family: "ipv6" })).toBe(
      "socks5://[::1]:1080/?family=ipv6"
    )
  })

  it("a name with both records pinned to ipv4 connects to the proxy over IPv4 only, and pinned to ipv6 over IPv6 only (HTTP proxy)", async () => {
    records.set("both.proxy.test", ["::1", "127.0.0.1"])
    const four = await proxyAndConnection({ type: "http", host: "both.proxy.test", port: dual.port, family: "ipv4" })
    const b4 = { v4: dual.v4.passed.length, v6: dual.v6.passed.length }
    expect((await chat(four.name)).status).toBe(200)
    expect((await chat(four.name, true)).status).toBe(200)
    expect(dual.v4.passed.length).toBeGreaterThan(b4.v4)
    expect(dual.v6.passed.length).toBe(b4.v6)

    records.set("both.proxy.test", ["127.0.0.1", "::1"])
    const six = await proxyAndConnection({ type: "http", host: "both.proxy.test", port: dual.port, family: "ipv6" })
    const b6 = { v4: dual.v4.passed.length, v6: dual.v6.passed.length }
    expect((await chat(six.name)).status).toBe(200)
    expect(dual.v6.passed.length).toBeGreaterThan(b6.v6)
    expect(dual.v4.passed.length).toBe(b6.v4)
  })

  it("applies to SOCKS5 proxies too: pinned ipv6 reaches the SOCKS5 server over ::1, pinned ipv4 over 127.0.0.1 (OpenAI SDK, streamed)", async () => {
    records.set("socks.proxy.test", ["127.0.0.1", "::1"])
    const six = await proxyAndConnection({ type: "socks5", host: "socks.proxy.test", port: socksDual.port, family: "ipv6" })
    const b = { v4: socksDual.v4.passed.length, v6: socksDual.v6.passed.length }
    const stream = await openai.chat.completions.create({
      model: `${six.name}/m1`,
      messages: [{ role: "user", content: "hi" }],
      stream: true
    })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe("pinned")
    expect(socksDual.v6.passed.length).toBe(b.v6 + 1)
    expect(socksDual.v4.passed.length).toBe(b.v4)

    const four = await proxyAndConnection({ type: "socks5", host: "socks.proxy.test", port: socksDual.port, family: "ipv4" })
    const r = await openai.chat.completions.create({ model: `${four.name}/m1`, messages: [{ role: "user", content: "hi" }] })
    expect(r.choices[0]!.message.content).toBe("pinned")
    expect(socksDual.v4.passed.length).toBe(b.v4 + 1)
  })
})

describe("rule 3: an IP literal that contradicts the directive is an error when the dispatcher is built", () => {
  it("buildDispatcher throws PROXY_FAMILY_UNAVAILABLE for ipv6 with an IPv4 literal and ipv4 with an IPv6 literal", () => {
    const lookup = () => undefined
    for (const [host, family] of [
      ["127.0.0.1", "ipv6"],
      ["::1", "ipv4"]
    ] as const) {
      for (const type of ["http", "socks5"] as const) {
        let thrown: unknown
        try {
          buildDispatcher({ type, host, port: 1, username: null, password: null, family }, lookup)
        } catch (e) {
          thrown = e
        }
        expect(thrown).toBeInstanceOf(ProxyFamilyUnavailable)
        expect((thrown as ProxyFamilyUnavailable).code).toBe("PROXY_FAMILY_UNAVAILABLE")
      }
    }
  })

  it("the global proxy (/api/settings/proxy, stored as given) with a contradicting literal refuses chat with 503 PROXY_FAMILY_UNAVAILABLE and sends nothing", async () => {
    const c = await call(`${gw.url}/api/providers`, {
      body: { provider: "openai-compatible", name: "global-user", baseUrl: fake.upstream.baseUrl, defaultModel: "m1" },
      headers: admin
    })
    expect(c.status).toBe(201)
    const put = await call(`${gw.url}/api/settings/proxy`, {
      method: "PUT",
      body: { url: `http://127.0.0.1:${dual.port}`, family: "ipv6" },
      headers: admin
    })
    expect(put.status, put.text).toBe(200)
    try {
      const before = { v4: dual.v4.passed.length, up: fake.upstream.chatRequests.length }
      const res = await chat("global-user")
      expect(res.status).toBe(503)
      expect(res.body.error.code).toBe("PROXY_FAMILY_UNAVAILABLE")
      expect(res.body.error.message).toContain("IPv4 address; family ipv6 contradicts it")
      expect(dual.v4.passed.length).toBe(before.v4)
      expect(fake.upstream.chatRequests.length).toBe(before.up)
    } finally {
      await call(`${gw.url}/api/settings/proxy`, { method: "PUT", body: { url: null }, headers: admin })
    }
  })
})

describe("rule 4: a pinned host name needs a record of its family (DNS pre-flight, fail-closed)", () => {
  const cases = [
    { family: "ipv4", records: ["127.0.0.1"], ok: true },
    { family: "ipv4", records: ["::1"], ok: false },
    { family: "ipv6", records: ["::1"], ok: true },
    { family: "ipv6", records: ["127.0.0.1"], ok: false }
  ] as const
  for (const k of cases) {
    it(`${k.family} with only ${k.records[0]!.includes(":") ? "an AAAA" : "an A"} record: ${k.ok ? "served" : "503 PROXY_FAMILY_UNAVAILABLE, nothing sent"}`, async () => {
      const name = `pf-${k.family}-${k.records[0]!.includes(":") ? "v6" : "v4"}-${n}.proxy.test`
      records.set(name, k.records)
      const c = await proxyAndConnection({ type: "http", host: name, port: dual.port, family: k.family })
      const before = { v4: dual.v4.passed.length, v6: dual.v6.passed.length, up: fake.upstream.chatRequests.length }
      const res = await chat(c.name)
      if (k.ok) {
        expect(res.status, res.text).toBe(200)
        return
      }
      expect(res.status).toBe(503)
      expect(res.body.error.code).toBe("PROXY_FAMILY_UNAVAILABLE")
      expect(res.body.error.message).toContain(`no IPv${k.family === "ipv4" ? 4 : 6} address`)
      expect({ v4: dual.v4.passed.length, v6: dual.v6.passed.length, up: fake.upstream.chatRequests.length }).toEqual(before)
    })
  }

  it("a lookup failure of the proxy's name is refused too (503 PROXY_FAMILY_UNAVAILABLE)", async () => {
    const c = await proxyAndConnection({ type: "socks5", host: "nxdomain.proxy.test", port: socksDual.port, family: "ipv4" })
    const res = await chat(c.name, true)
    expect(res.status).toBe(503)
    expect(res.body.error.code).toBe("PROXY_FAMILY_UNAVAILABLE")
    expect(res.body.error.message).toContain("could not be resolved")
  })
})

describe("rule 5: the refusal is 503 PROXY_FAMILY_UNAVAILABLE in the client's format", () => {
  it("OpenAI SDK: an APIError with status 503 and code PROXY_FAMILY_UNAVAILABLE", async () => {
    records.set("v4only.proxy.test", ["127.0.0.1"])
    const c = await proxyAndConnection({ type: "http", host: "v4only.proxy.test", port: dual.port, family: "ipv6" })
    const err = await openai.chat.completions.create({ model: `${c.name}/m1`, messages: [{ role: "user", content: "hi" }] }).then(
      () => undefined,
      (e: unknown) => e
    )
    expect(err).toBeInstanceOf(OpenAI.APIError)
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503)
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("PROXY_FAMILY_UNAVAILABLE")
  })

  it("Anthropic SDK (/v1/messages): an APIError with status 503, an Anthropic error body naming PROXY_FAMILY_UNAVAILABLE", async () => {
    records.set("v6only.proxy.test", ["::1"])
    const c = await proxyAndConnection({ type: "http", host: "v6only.proxy.test", port: dual.port, family: "ipv4" })
    const err = await anthropic.messages
      .create({ model: `${c.name}/m1`, max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
      .then(
        () => undefined,
        (e: unknown) => e
      )
    expect(err).toBeInstanceOf(Anthropic.APIError)
    const e = err as InstanceType<typeof Anthropic.APIError>
    expect(e.status).toBe(503)
    const body = e.error as { type: string; error: { type: string; message: string } }
    expect(body.type).toBe("error")
    expect(body.error.message).toContain("PROXY_FAMILY_UNAVAILABLE")
  })
})

describe("POST /api/settings/proxy/test with a pinned family", () => {
  it("reports ipv6 through ::1 and ipv4 through 127.0.0.1, and refuses a family the proxy name has no record of", async () => {
    records.set("both.proxy.test", ["127.0.0.1", "::1"])
    const test = (family: string) =>
      call(`${gw.url}/api/settings/proxy/test`, {
        body: { url: `${fake.upstream.url}/v1/models`, proxy: `http://both.proxy.test:${dual.port}`, family },
        headers: admin
      })
    const six = await test("ipv6")
    expect(six.body, six.text).toMatchObject({ ok: true, family: "ipv6" })
    const four = await test("ipv4")
    expect(four.body).toMatchObject({ ok: true, family: "ipv4" })
    records.set("both.proxy.test", ["127.0.0.1"])
    const none = await test("ipv6")
    expect(none.body.ok).toBe(false)
    expect(none.body.error).toContain("no usable IPv6 address")
  })
})
