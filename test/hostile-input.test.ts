import * as Effect from "effect/Effect"
import { Dashboard } from "../src/management/dashboard/Dashboard.js"
import { InspectorFeed } from "../src/management/dashboard/InspectorFeed.js"
import { LiveFeed } from "../src/management/dashboard/LiveFeed.js"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as ManagedRuntime from "effect/ManagedRuntime"
import type * as http from "node:http"
import * as net from "node:net"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { AdminAuth } from "../src/services/auth/AdminAuth.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { FeatureFlags } from "../src/platform/flags/FeatureFlags.js"
import { GatewayServer } from "../src/kernel/internalCall.js"
import * as Server from "../src/server/Server.js"
import { InferenceRoutes } from "../src/inference/InferenceRoutes.js"
import { RealtimeWebSocket } from "../src/server/RealtimeWebSocket.js"
import { ResponsesWebSocket } from "../src/server/ResponsesWebSocket.js"
import { ManagementHandler } from "../src/management/api/ManagementHandler.js"
import { McpGateway } from "../src/inference/mcp/McpGateway.js"
import { McpHttp } from "../src/management/mcp/McpHttp.js"
import { scrubSecrets } from "../src/kernel/redact.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, rawCall, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { Settings } from "../src/platform/settings/Settings.js"

/**
 * Input from outside that node or the JavaScript runtime throws on: malformed percent-escapes in
 * a path, JSON nested thousands deep, header values with CR/LF or characters above U+00FF. Each
 * is a clear 4xx (or, for header values, an encoded header) and never a 500, a dropped answer or
 * a dead process. Shutdown with kept-alive sockets is here too (docs/errors.md, docs/ARCHITECTURE.md).
 */
const ADMIN = "gwk_hostile_admin_key_0123456789abcdef"
const KEY = "gwk_hostile_client_key_0123456789abcd"
const admin = { authorization: `Bearer ${ADMIN}` }
const client = { authorization: `Bearer ${KEY}` }

let gw: TestGateway
let up: FakeUpstream

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, res.text).toBe(201)
  }
  await add({ provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" })
  await add({
    provider: "openai-compatible",
    name: "resp",
    upstreamFormat: "openai-responses",
    baseUrl: up.baseUrl("openai-responses"),
    models: ["gpt-5"]
  })
  await add({ provider: "gemini", name: "gem", apiKey: "gkey", baseUrl: up.baseUrl("gemini") })
  await add({ provider: "anthropic", name: "ant", apiKey: "akey", baseUrl: up.baseUrl("anthropic") })
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
beforeEach(async () => {
  up.requests.length = 0
  up.violations.length = 0
  up.always({})
  await gw.resetResilience()
})

/** A request with the path exactly as given (fetch would normalise some paths). */
const raw = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
  rawCall(gw.url, method, path, { ...headers, ...(body ? { "content-type": "application/json" } : {}) }, body)

const chatBody = (extra: Record<string, unknown> = {}) => ({ model: "up/m1", messages: [{ role: "user", content: "hi" }], ...extra })
const deepArray = (n: number) => "[".repeat(n) + "]".repeat(n)
const deepObject = (n: number) => '{"a":'.repeat(n) + "1" + "}".repeat(n)
/** JSON text of `body` with `"$DEEP"` replaced by `deep`. */
const withDeep = (body: unknown, deep: string) => JSON.stringify(body).replace('"$DEEP"', deep)

describe("malformed percent-escapes in a path", () => {
  it("the editor route answers 400 naming the problem, before authentication", async () => {
    for (const path of ["/api/v1/editor/%ZZ", "/api/v1/editor/%ZZ/models", "/api/v1/editor/%E0%A4%A/chat/completions"]) {
      const res = await raw(
        path.endsWith("completions") ? "POST" : "GET",
        path,
        {},
        path.endsWith("completions") ? JSON.stringify(chatBody()) : undefined
      )
      expect(res.status, `${path}: ${res.text}`).toBe(400)
      expect(res.body.error.message).toContain("path parameter 'token' is not valid percent-encoding")
      expect(res.body.error.code).toBe("invalid_path_encoding")
    }
    // A well-formed token still authenticates as before.
    expect((await raw("GET", `/api/v1/editor/${KEY}/models`)).status).toBe(200)
  })

  it("the OpenAI model route, the Gemini routes and the provider routes answer 400 in their client's format", async () => {
    const model = await raw("GET", "/v1/models/%E0%A4%A", client)
    expect(model.status, model.text).toBe(400)
    expect(model.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_path_encoding", param: "model" })
    expect(model.body.error.message).toContain("'/v1/models/%E0%A4%A'")

    for (const [method, path] of [
      ["GET", "/v1beta/models/%ZZ"],
      ["POST", "/v1beta/models/%ZZ:generateContent"],
      ["POST", "/v1/models/m%E0:countTokens"]
    ] as const) {
      const res = await raw(
        method,
        path,
        { "x-goog-api-key": KEY },
        method === "POST" ? JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }) : undefined
      )
      expect(res.status, `${path}: ${res.text}`).toBe(400)
      // Gemini's error shape: { error: { code, message, status } }.
      expect(res.body.error).toMatchObject({ code: 400, status: "INVALID_ARGUMENT" })
      expect(res.body.error.message).toContain("not valid percent-encoding")
    }

    const provider = await raw("POST", "/v1/providers/%ZZ/chat/completions", client, JSON.stringify(chatBody({ model: "m1" })))
    expect(provider.status, provider.text).toBe(400)
    expect(provider.body.error).toMatchObject({ code: "invalid_path_encoding", param: "provider" })
    expect(up.requests).toHaveLength(0)
  })

  it("well-formed escapes are decoded once, as before", async () => {
    const res = await raw("GET", "/v1/models/up%2Fm1", client)
    expect(res.status, res.text).toBe(200)
    expect(res.body.id).toBe("up/m1")
    const routed = await raw(
      "POST",
      "/v1/providers/openai%2Dcompatible/chat/completions",
      client,
      JSON.stringify(chatBody({ model: "m1" }))
    )
    expect(routed.status, routed.text).toBe(200)
  })

  it("the management plane answers 400 BadRequest instead of 'no route'", async () => {
    for (const path of ["/api/providers/%ZZ", "/api/combos/%E0%A4%A", "/api/keys/%ZZ"]) {
      const res = await raw(path.startsWith("/api/keys") ? "DELETE" : "GET", path, admin)
      expect(res.status, `${path}: ${res.text}`).toBe(400)
      expect(res.body).toMatchObject({ _tag: "BadRequest" })
      expect(res.body.message).toContain("not valid percent-encoding")
    }
  })

  it("a malformed $ref escape in a tool schema sent to Gemini is taken literally, not a 500", async () => {
    const tools = [
      {
        type: "function",
        function: {
          name: "f",
          parameters: { type: "object", properties: { x: { $ref: "#/$defs/%ZZ" } }, $defs: { "%ZZ": { type: "string" } } }
        }
      }
    ]
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "gem/gemini-2.5-flash", messages: [{ role: "user", content: "hi" }], tools },
      headers: client
    })
    expect(res.status, res.text).toBe(200)
    expect(up.requests[0]!.body.tools[0].functionDeclarations[0].parameters.properties.x).toMatchObject({ type: "string" })
  })
})

describe("JSON nested deeper than 128 levels", () => {
  it("is a 400 naming the limit, in metadata or in a tool's parameters, before anything is sent upstream", async () => {
    const bodies = [
      withDeep(chatBody({ metadata: { a: "$DEEP" } }), deepArray(5000)),
      withDeep(chatBody({ metadata: { a: "$DEEP" } }), deepObject(5000)),
      withDeep(chatBody({ tools: [{ type: "function", function: { name: "f", parameters: "$DEEP" } }] }), deepObject(5000)),
      // Just over the limit.
      withDeep(chatBody({ metadata: "$DEEP" }), deepObject(128))
    ]
    for (const body of bodies) {
      const res = await raw("POST", "/v1/chat/completions", client, body)
      expect(res.status, res.text.slice(0, 300)).toBe(400)
      expect(res.body.error.message).toContain("JSON nested deeper than 128 levels")
      expect(res.body.error.code).toBe("json_too_deep")
    }
    const anthropic = await raw(
      "POST",
      "/v1/messages",
      client,
      withDeep(
        { model: "up/m1", max_tokens: 5, messages: [{ role: "user", content: "hi" }], tools: [{ name: "f", input_schema: "$DEEP" }] },
        deepObject(5000)
      )
    )
    expect(anthropic.status).toBe(400)
    expect(anthropic.body).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
    expect(anthropic.body.error.message).toContain("JSON nested deeper than 128 levels")
    const responses = await raw(
      "POST",
      "/v1/responses",
      client,
      withDeep({ model: "up/m1", input: "hi", metadata: { a: "$DEEP" } }, deepArray(5000))
    )
    expect(responses.status).toBe(400)
    expect(up.requests).toHaveLength(0)
  })

  it("deep but within the limit (a real tool schema nests far less) is served; brackets inside strings do not count", async () => {
    const schema = withDeep(
      { type: "object", properties: { x: "$DEEP" } },
      '{"type":"object","properties":{"y":'.repeat(40) + '{"type":"string"}' + "}}".repeat(40)
    )
    const body = withDeep(
      chatBody({
        tools: [{ type: "function", function: { name: "f", parameters: "$DEEP" } }],
        metadata: { note: "[[[[{{{{".repeat(100) + '\\"' + "[".repeat(300) }
      }),
      schema
    )
    const res = await raw("POST", "/v1/chat/completions", client, body)
    expect(res.status, res.text.slice(0, 300)).toBe(200)
    expect(res.body.choices[0].message.content).toBe("Hello from upstream")
  })

  it("is an error frame, not a 500, over the WebSocket Responses transport; the socket keeps working", async () => {
    const ws = new WebSocket(gw.url.replace(/^http/, "ws") + "/v1/responses", { headers: client })
    const frames: Array<any> = []
    const next = () =>
      new Promise<any>((resolve, reject) => {
        const have = frames.length
        const check = () => (frames.length > have ? resolve(frames[have]) : setTimeout(check, 10))
        setTimeout(() => reject(new Error(`no frame; got ${JSON.stringify(frames)}`)), 5000).unref()
        check()
      })
    ws.on("message", (d) => frames.push(JSON.parse(String(d))))
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject))
    try {
      const wait = next()
      ws.send(withDeep({ type: "response.create", model: "gpt-5", input: "hi", stream: true, metadata: { a: "$DEEP" } }, deepArray(5000)))
      const error = await wait
      expect(error).toMatchObject({ type: "error", status: 400, error: { code: "json_too_deep" } })
      expect(error.error.message).toContain("JSON nested deeper than 128 levels")
      const wait2 = next()
      ws.send(
        JSON.stringify({
          type: "response.create",
          model: "gpt-5",
          input: "hi",
          stream: true,
          tools: [{ type: "function", name: "f", parameters: "$DEEP" }]
        }).replace('"$DEEP"', deepObject(5000))
      )
      expect(await wait2).toMatchObject({ type: "error", status: 400, error: { code: "json_too_deep" } })
      const created = next()
      ws.send(JSON.stringify({ type: "response.create", model: "gpt-5", input: "hi", stream: true }))
      expect((await created).type).toBe("response.created")
    } finally {
      ws.close()
    }
  })

  it("management JSON bodies too: 400 instead of a 500, even unauthenticated", async () => {
    const cases: Array<[string, string, string, Record<string, string>]> = [
      [
        "POST",
        "/api/combos",
        withDeep({ name: "c", strategy: "priority", targets: [{ model: "up/m1" }], config: { a: "$DEEP" } }, deepArray(5000)),
        admin
      ],
      [
        "POST",
        "/api/providers",
        withDeep({ provider: "openai-compatible", name: "$DEEP", baseUrl: "http://127.0.0.1:1/v1" }, deepArray(5000)),
        admin
      ],
      ["POST", "/api/auth/login", withDeep({ password: "$DEEP" }, deepObject(5000)), {}]
    ]
    for (const [method, path, body, headers] of cases) {
      const res = await raw(method, path, headers, body)
      expect(res.status, `${path}: ${res.text.slice(0, 300)}`).toBe(400)
      expect(res.body).toMatchObject({ _tag: "BadRequest" })
      expect(res.body.message).toContain("JSON nested deeper than 128 levels")
    }
    // Ordinary bodies still reach their handlers.
    const ok = await call(`${gw.url}/api/combos`, {
      body: { name: "fine", strategy: "priority", targets: [{ model: "up/m1" }] },
      headers: admin
    })
    expect(ok.status, ok.text).toBe(201)
  })
})

describe("response header values from outside", () => {
  it("a model name with CR/LF or Cyrillic and a prompt_cache_key with CR/LF and é€: the client gets its 200 answer, the headers percent-encoded", async () => {
    for (const model of ["m\r\nx", "модель"]) {
      const res = await call(`${gw.url}/v1/chat/completions`, { body: chatBody({ model: `up/${model}` }), headers: client })
      expect(res.status, res.text).toBe(200)
      // The upstream answered with that model name; it reaches the client in the body as it is.
      expect(res.body.model).toBe(model)
      expect(res.body.choices[0].message.content).toBe("Hello from upstream")
      expect(decodeURIComponent(res.headers.get("x-gateway-model")!)).toBe(model)
    }
    const key = "conv\r\n1 é€"
    const res = await call(`${gw.url}/v1/chat/completions`, { body: chatBody({ prompt_cache_key: key }), headers: client })
    expect(res.status, res.text).toBe(200)
    expect(res.headers.get("x-gateway-session-id")).toBe("conv%0D%0A1%20%C3%A9%E2%82%AC")
    expect(decodeURIComponent(res.headers.get("x-gateway-session-id")!)).toBe(key)
    // Plain values are sent as they are.
    const plain = await call(`${gw.url}/v1/chat/completions`, { body: chatBody({ prompt_cache_key: "conv-1" }), headers: client })
    expect(plain.headers.get("x-gateway-session-id")).toBe("conv-1")
    expect(plain.headers.get("x-gateway-model")).toBe("m1")
    // A `%` is encoded too, so every value decodes back to what it was.
    const percent = await call(`${gw.url}/v1/chat/completions`, { body: chatBody({ prompt_cache_key: "50%41" }), headers: client })
    expect(percent.headers.get("x-gateway-session-id")).toBe("50%2541")
    expect(decodeURIComponent(percent.headers.get("x-gateway-session-id")!)).toBe("50%41")
  })

  it("streamed answers, a lone surrogate and an over-long model name: answered, never thrown", async () => {
    const stream = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...client },
      body: JSON.stringify(chatBody({ model: "up/модель", stream: true, prompt_cache_key: "a\ud800b" }))
    })
    expect(stream.status).toBe(200)
    expect(await stream.text()).toContain("data: [DONE]")
    expect(stream.headers.get("x-gateway-session-id")).toBe("a%EF%BF%BDb")
    const long = await call(`${gw.url}/v1/chat/completions`, { body: chatBody({ model: `up/${"é".repeat(2000)}` }), headers: client })
    expect(long.status, long.text).toBe(200)
    // Too long for a header: left out rather than sent.
    expect(long.headers.get("x-gateway-model")).toBeNull()
    expect(long.headers.get("x-gateway-provider")).toBe("openai-compatible")
  })
})

describe("lone surrogates from a JSON body", () => {
  // "\ud800" is valid JSON and decodes to a lone surrogate, which encodeURIComponent throws on.
  it("a model name with one reaches the upstream path (which puts the model in its URL) without a 500", async () => {
    const chat = await raw("POST", "/v1/chat/completions", client, `{"model":"gem/x\\ud800","messages":[{"role":"user","content":"hi"}]}`)
    expect(chat.status, chat.text).toBe(200)
    expect(
      up.requests.some((r) => r.path.includes("x%EF%BF%BD")),
      JSON.stringify(up.requests.map((r) => r.path))
    ).toBe(true)
    // The upstream URL is built for every family, also where it does not name the model.
    const count = await raw(
      "POST",
      "/v1/messages/count_tokens",
      client,
      `{"model":"ant/x\\udc00y","messages":[{"role":"user","content":"hi"}]}`
    )
    expect(count.status, count.text).toBe(200)
    expect(up.requests.some((r) => r.path === "/v1/messages/count_tokens")).toBe(true)
  })

  it("a provider key with one is still scrubbed from upstream errors without a 500", async () => {
    expect(scrubSecrets("the key was ab\ud800cdefghijklmnop", ["ab\ud800cdefghijklmnop"])).not.toContain("cdefghijklmnop")
  })
})

describe("shutdown with kept-alive sockets", () => {
  it("an answer in flight says Connection: close and its socket ends cleanly; an idle kept-alive socket ends cleanly too", async () => {
    const own = await startGateway()
    try {
      await own.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      expect(
        (
          await call(`${own.url}/api/providers`, {
            body: { provider: "openai-compatible", name: "slow", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" },
            headers: admin
          })
        ).status
      ).toBe(201)
      const port = Number(new URL(own.url).port)
      const open = (): Promise<{ socket: net.Socket; data: () => string; ended: Promise<Array<string>> }> =>
        new Promise((resolve) => {
          const socket = net.connect(port, "127.0.0.1", () => resolve({ socket, data: () => got, ended }))
          let got = ""
          const events: Array<string> = []
          socket.setEncoding("latin1")
          socket.on("data", (d: string) => (got += d))
          socket.on("end", () => events.push("end"))
          socket.on("error", (e: NodeJS.ErrnoException) => events.push(`error ${e.code}`))
          const ended = new Promise<Array<string>>((r) => socket.on("close", () => r(events)))
        })
      // An idle kept-alive socket: one answered request, then nothing.
      const idle = await open()
      idle.socket.write("GET /api/hello HTTP/1.1\r\nHost: x\r\n\r\n")
      await expect.poll(() => idle.data(), { timeout: 10_000 }).toContain('{"ok":true}')
      expect(idle.data()).toMatch(/connection: keep-alive/i)
      // A request in flight: the upstream answers after shutdown began.
      up.always({ delayMs: 400 })
      const busy = await open()
      const body = JSON.stringify(chatBody({ model: "slow/m1" }))
      busy.socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`
      )
      await expect.poll(() => up.requests.length, { timeout: 10_000 }).toBe(1)
      const closed = own.close()
      expect(await idle.ended).toEqual(["end"])
      expect(await busy.ended).toEqual(["end"])
      await closed
      expect(busy.data()).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
      expect(busy.data()).toMatch(/\r\nconnection: close\r\n/i)
      expect(busy.data()).toContain("Hello from upstream")
    } finally {
      await own.close()
    }
  })
})

describe("the server's last resort", () => {
  it("a handler that throws (a bug) gets a 500 in OpenAI's error shape and a log line; the server keeps serving, upgrades too", async () => {
    const logs: Array<string> = []
    let calls = 0
    const routes = {
      deps: {} as never,
      route: (_req: http.IncomingMessage, res: http.ServerResponse, path: string) => {
        calls++
        if (path === "/boom") throw new URIError("URI malformed")
        return { requestId: "req_ok", program: Effect.sync(() => void res.end("fine")) }
      }
    }
    const layer = Server.layer.pipe(
      Layer.provide(Layer.succeed(InferenceRoutes, routes)),
      Layer.provide(Layer.succeed(ManagementHandler, (_req, res) => void res.end("management"))),
      Layer.provide(
        Layer.succeed(ResponsesWebSocket, {
          upgrade: () => {
            throw new Error("upgrade bug")
          }
        })
      ),
      Layer.provide(Layer.succeed(RealtimeWebSocket, { upgrade: () => false })),
      Layer.provide(Layer.succeed(Dashboard, { handle: () => false })),
      Layer.provide(Layer.succeed(LiveFeed, { upgrade: () => false, port: () => undefined })),
      Layer.provide(Layer.succeed(InspectorFeed, { upgrade: () => false })),
      Layer.provide(
        Layer.succeed(McpHttp, { handle: (_req: http.IncomingMessage, res: http.ServerResponse) => void res.end("mcp") } as never)
      ),
      Layer.provide(
        Layer.succeed(McpGateway, {
          handle: (_req: http.IncomingMessage, res: http.ServerResponse) => void res.end("mcp gateway")
        } as never)
      ),
      Layer.provide(Layer.succeed(FeatureFlags, { enabled: () => Effect.succeed(false) } as never)),
      Layer.provide(Layer.succeed(Settings, { ipFilter: () => ({ active: false, check: () => undefined }) } as never)),
      Layer.provide(Layer.succeed(ApiKeys, { hasAdminKey: Effect.succeed(true) } as never)),
      Layer.provide(Layer.succeed(AdminAuth, { hasPassword: Effect.succeed(true) } as never)),
      Layer.provide(AppConfig.layerTest({ dataDir: tempDir(), host: "127.0.0.1", port: 0 })),
      Layer.provide(
        Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ message }) => logs.push(Array.isArray(message) ? message.join(" ") : String(message)))
        )
      )
    )
    const runtime = ManagedRuntime.make(layer)
    try {
      const { url } = await runtime.runPromise(GatewayServer)
      const boom = await call(`${url}/boom`)
      expect(boom.status).toBe(500)
      expect(boom.body.error).toMatchObject({ type: "server_error", code: "internal_error" })
      expect(boom.body.error.message).toMatch(/^internal error \(request req_/)
      expect(boom.text).not.toContain("URIError")
      expect(logs.some((l) => l.includes("GET /boom failed unexpectedly") && l.includes("URI malformed"))).toBe(true)
      const after = await fetch(`${url}/fine`)
      expect(await after.text()).toBe("fine")
      const refused = await new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(url.replace(/^http/, "ws") + "/v1/responses")
        ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0))
        ws.once("error", reject)
      })
      expect(refused).toBe(500)
      expect((await fetch(`${url}/fine`)).status).toBe(200)
      expect(calls).toBe(3)
    } finally {
      await runtime.dispose()
    }
  })
})
