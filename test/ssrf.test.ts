import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FeatureFlags } from "../src/platform/flags/FeatureFlags.js"
import type { ResolvedAddress } from "../src/upstream/client/egressGuard.js"
import { UpstreamHttp } from "../src/upstream/client/UpstreamHttp.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * The outbound SSRF guard (docs/security.md "Outbound requests") with real sockets. Host names
 * resolve through a resolver the test gives the gateway, so a name can point at loopback, at a
 * cloud metadata address, or change its answer between two lookups, and nothing leaves
 * 127.0.0.1/127.0.0.2: every address a refused name resolves to is never connected to.
 */
const ADMIN = "gwk_ssrf_admin_key_0123456789abcdefghij"
const admin = { authorization: `Bearer ${ADMIN}` }

/** A chat-completions upstream on one address, recording the local address of every request. */
interface Upstream {
  readonly port: number
  readonly seen: Array<string>
  closeEach: boolean
  close(): Promise<void>
}
const upstreamOn = async (host: string, port = 0): Promise<Upstream> => {
  const self: Upstream = { port: 0, seen: [], closeEach: false, close: async () => undefined }
  const server = http.createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      self.seen.push(req.socket.localAddress ?? "")
      const body = req.url?.endsWith("/models")
        ? { object: "list", data: [{ id: "m1", object: "model" }] }
        : {
            id: "c1",
            object: "chat.completion",
            created: 1,
            model: "m1",
            choices: [{ index: 0, message: { role: "assistant", content: `from ${req.socket.localAddress}` }, finish_reason: "stop" }],
            usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }
          }
      res.writeHead(200, { "content-type": "application/json", ...(self.closeEach ? { connection: "close" } : {}) })
      res.end(JSON.stringify(body))
    })
  })
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, host, resolve))
  ;(self as { port: number }).port = (server.address() as AddressInfo).port
  self.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return self
}

/** name → what each successive lookup answers (the last answer repeats); every lookup counted. */
const answers = new Map<string, Array<ReadonlyArray<string>>>()
const lookups = new Map<string, number>()
const resolve = async (name: string): Promise<ReadonlyArray<ResolvedAddress>> => {
  const n = lookups.get(name) ?? 0
  lookups.set(name, n + 1)
  const list = answers.get(name)
  if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: "ENOTFOUND" })
  return list[Math.min(n, list.length - 1)]!.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }))
}

let gw: TestGateway
let local: Upstream

const setFlags = (
  values: Partial<
    Record<"OUTBOUND_SSRF_GUARD_ENABLED" | "GATEWAY_ALLOW_LOCAL_PROVIDER_URLS" | "GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS", string>
  >
) =>
  gw.run(
    Effect.gen(function* () {
      const flags = yield* FeatureFlags
      for (const key of [
        "OUTBOUND_SSRF_GUARD_ENABLED",
        "GATEWAY_ALLOW_LOCAL_PROVIDER_URLS",
        "GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS"
      ] as const) {
        yield* Effect.orDie(flags.set(key, values[key]))
      }
    })
  )

/** A connection whose base URL is `http://<name>:<port>/v1`; answers its id. */
const connect = async (name: string, port: number): Promise<string> => {
  const res = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name, baseUrl: `http://${name}:${port}/v1`, defaultModel: "m1" },
    headers: admin
  })
  expect(res.status, res.text).toBe(201)
  return res.body.id
}
const chat = (connection: string) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model: `${connection}/m1`, messages: [{ role: "user", content: "hi" }] } })

beforeAll(async () => {
  local = await upstreamOn("127.0.0.1")
  gw = await startGateway({ dns: resolve })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})

afterAll(async () => {
  await gw?.close()
  await local?.close()
})

beforeEach(async () => {
  await setFlags({})
  await gw.resetResilience()
})

describe("host names are resolved and every address is checked", () => {
  it("refuses a name that resolves to loopback while GATEWAY_ALLOW_LOCAL_PROVIDER_URLS is off: 403 provider_url_blocked naming the class, not the address", async () => {
    answers.set("loop.test", [["127.0.0.1"]])
    await connect("loop.test", local.port)
    await setFlags({ GATEWAY_ALLOW_LOCAL_PROVIDER_URLS: "false" })
    const before = local.seen.length
    const res = await chat("loop.test")
    expect(res.status).toBe(403)
    expect(res.body.error.code).toBe("provider_url_blocked")
    expect(res.body.error.message).toContain("loop.test resolves to a loopback address")
    expect(res.body.error.message).toContain("GATEWAY_ALLOW_LOCAL_PROVIDER_URLS")
    expect(res.body.error.message).not.toContain("127.0.0.1")
    expect(local.seen.length).toBe(before)

    // The same name with the flag back on (its default) is served, by the address it resolved to.
    await setFlags({})
    const ok = await chat("loop.test")
    expect(ok.status).toBe(200)
    expect(ok.body.choices[0].message.content).toBe("from 127.0.0.1")
  })

  it("refuses a name when any one of its addresses is refused, even if the first one is allowed", async () => {
    answers.set("mixed.test", [["127.0.0.1", "169.254.169.254"]])
    await connect("mixed.test", local.port)
    const before = local.seen.length
    const res = await chat("mixed.test")
    expect(res.status).toBe(403)
    expect(res.body.error.message).toContain("mixed.test resolves to a cloud metadata address")
    expect(local.seen.length).toBe(before)
  })

  it("refuses a private (CGNAT) answer unless GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS is on", async () => {
    answers.set("cgnat.test", [["100.64.0.9"]])
    await connect("cgnat.test", 9)
    const res = await chat("cgnat.test")
    expect(res.status).toBe(403)
    expect(res.body.error.message).toContain("cgnat.test resolves to a private address; GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS is off")
  })
})

describe("cloud metadata addresses", () => {
  it("are refused with both allow flags on, whatever name points at them", async () => {
    await setFlags({ GATEWAY_ALLOW_LOCAL_PROVIDER_URLS: "true", GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS: "true" })
    for (const [name, address] of [
      ["aws-meta.test", "169.254.169.254"],
      ["ecs-meta.test", "169.254.170.2"],
      ["alibaba-meta.test", "100.100.100.200"],
      ["aws6-meta.test", "fd00:ec2::254"],
      ["mapped-meta.test", "::ffff:169.254.169.254"]
    ] as const) {
      answers.set(name, [[address]])
      await connect(name, 80)
      const res = await chat(name)
      expect(res.status, name).toBe(403)
      expect(res.body.error.message, name).toContain(
        `${name} resolves to a cloud metadata address; cloud metadata addresses are always blocked`
      )
    }
  })

  it("cannot be a connection's base URL, as an address or as a metadata name", async () => {
    await setFlags({ GATEWAY_ALLOW_LOCAL_PROVIDER_URLS: "true", GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS: "true" })
    for (const baseUrl of [
      "http://169.254.169.254/v1",
      "http://metadata.google.internal/v1",
      "http://[fd00:ec2::254]/v1",
      "http://100.100.100.200/v1"
    ]) {
      const res = await call(`${gw.url}/api/providers`, {
        body: { provider: "openai-compatible", name: `m-${baseUrl.length}`, baseUrl },
        headers: admin
      })
      expect(res.status, baseUrl).toBe(400)
      expect(res.body.message, baseUrl).toContain("metadata")
    }
  })

  it("are refused on provider tests too (the same agent carries every outbound call)", async () => {
    answers.set("probe-meta.test", [["169.254.169.254"]])
    const id = await connect("probe-meta.test", 80)
    const res = await call(`${gw.url}/api/providers/${id}/test`, { method: "POST", headers: admin })
    expect(res.status).toBe(200)
    expect(res.body.ok).toBe(false)
    expect(res.body.error).toContain("cloud metadata")
  })
})

describe("DNS rebinding", () => {
  it("connects to exactly the address that was checked: one lookup per connection, and a later rebinding answer is refused", async () => {
    // The name answers 127.0.0.2 first, then a metadata address. A gateway that resolved once to
    // check and again to connect would check 127.0.0.2 and connect to 169.254.169.254.
    const rebinding = await upstreamOn("127.0.0.2")
    rebinding.closeEach = true
    try {
      answers.set("rebind.test", [["127.0.0.2"], ["169.254.169.254"]])
      await connect("rebind.test", rebinding.port)
      const first = await chat("rebind.test")
      expect(first.status, first.text).toBe(200)
      expect(first.body.choices[0].message.content).toBe("from 127.0.0.2")
      expect(rebinding.seen).toEqual(["127.0.0.2"])
      expect(lookups.get("rebind.test")).toBe(1)

      // The upstream closed that connection: the next request connects anew, resolves anew, and
      // is refused on what the name now answers; the upstream sees nothing more.
      const second = await chat("rebind.test")
      expect(second.status).toBe(403)
      expect(second.body.error.message).toContain("rebind.test resolves to a cloud metadata address")
      expect(lookups.get("rebind.test")).toBe(2)
      expect(rebinding.seen).toEqual(["127.0.0.2"])
    } finally {
      await rebinding.close()
    }
  })
})

describe("OUTBOUND_SSRF_GUARD_ENABLED", () => {
  it("off: no address is judged (loopback names go through with local URLs disallowed)", async () => {
    answers.set("noguard.test", [["127.0.0.1"]])
    await connect("noguard.test", local.port)
    await setFlags({ GATEWAY_ALLOW_LOCAL_PROVIDER_URLS: "false" })
    expect((await chat("noguard.test")).status).toBe(403)
    await setFlags({ GATEWAY_ALLOW_LOCAL_PROVIDER_URLS: "false", OUTBOUND_SSRF_GUARD_ENABLED: "false" })
    const res = await chat("noguard.test")
    expect(res.status).toBe(200)
    expect(res.body.choices[0].message.content).toBe("from 127.0.0.1")
  })
})

describe("clients built on fetch (the sync server)", () => {
  it("go through the same guard: a name resolving to a refused address rejects before any byte is sent", async () => {
    answers.set("sync.test", [["127.0.0.1"]])
    await setFlags({ GATEWAY_ALLOW_LOCAL_PROVIDER_URLS: "false" })
    const before = local.seen.length
    const error = await gw.run(
      Effect.flatMap(UpstreamHttp, (h) => Effect.flip(Effect.tryPromise(() => h.fetch(`http://sync.test:${local.port}/api/health/ping`))))
    )
    expect(String((error.cause as Error & { cause?: Error })?.cause?.message ?? error)).toContain(
      "sync.test resolves to a loopback address"
    )
    const literal = await gw.run(
      Effect.flatMap(UpstreamHttp, (h) => Effect.flip(Effect.tryPromise(() => h.fetch(`http://127.0.0.1:${local.port}/x`))))
    )
    expect(String((literal.cause as Error & { cause?: Error })?.cause?.message)).toContain("127.0.0.1 is a loopback address")
    expect(local.seen.length).toBe(before)
    await setFlags({})
    const ok = await gw.run(
      Effect.flatMap(UpstreamHttp, (h) => Effect.promise(() => h.fetch(`http://sync.test:${local.port}/v1/models`).then((r) => r.status)))
    )
    expect(ok).toBe(200)
  })
})
