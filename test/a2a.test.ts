import { Role, TaskState } from "@a2a-js/sdk"
import { Client, ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client"
import { LegacyJsonRpcTransport } from "@a2a-js/sdk/compat/v0_3/client"
import { A2AClient } from "a2a-sdk-0.3/client"
import * as Effect from "effect/Effect"
import * as http from "node:http"
import type * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { runCli } from "./support/cli.js"
import { call, rawCall, startGateway, type TestGateway } from "./support/gateway.js"
import { refusedPort } from "./support/refusedPort.js"

/**
 * A2A (spec document 2, "Agent skill discovery"; docs/skills.md): `POST /a2a` JSON-RPC 2.0 and
 * the agent card of a real gateway, fetched from outside, and `gateway a2a status|card` spawned
 * as processes against it.
 */
const ADMIN = "gwk_a2a_admin_key_0123456789abcdefgh"
const USER = "gwk_a2a_user_key_0123456789abcdefghi"

let gw: TestGateway
beforeAll(async () => {
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: USER })))
})
afterAll(async () => {
  await gw?.close()
})

const rpc = (body: unknown, headers: Record<string, string> = {}) => call(`${gw.url}/a2a`, { body, headers })
const send = (params: unknown, method = "message/send", id: unknown = 7) => rpc({ jsonrpc: "2.0", id, method, params })
const ask = { skill: "list-capabilities", messages: [{ role: "user", content: "What can you do?" }] }

const requireKeys = async (on: boolean) => {
  const r = await call(`${gw.url}/api/settings/feature-flags`, {
    method: "PUT",
    body: { key: "REQUIRE_API_KEY", value: String(on) },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  expect(r.status).toBe(200)
}

/** The rows of a markdown table (header and separator left out), split into trimmed cells. */
const rows = (table: string) =>
  table
    .split("\n")
    .slice(2)
    .map((line) =>
      line
        .slice(2, -2)
        .split(" | ")
        .map((c) => c.trim())
    )

describe("POST /a2a", () => {
  it("message/send with list-capabilities answers a task whose first artifact is a table of the 42 skills with raw URLs that serve them", async () => {
    const r = await send(ask)
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ jsonrpc: "2.0", id: 7, result: { kind: "task", status: { state: "completed" } } })
    const artifact = r.body.result.artifacts[0]
    expect(artifact.parts).toEqual([{ kind: "text", text: artifact.content }])
    const [header] = artifact.content.split("\n")
    expect(header).toBe("| id | name | category | description | raw URL |")
    const table = rows(artifact.content)
    expect(table).toHaveLength(42)
    const catalog = (await call(`${gw.url}/api/agent-skills`)).body.skills
    expect(table.map((c) => c[0])).toEqual(catalog.map((s: { id: string }) => s.id))
    for (const [id, name, category, , rawUrl] of table) {
      const entry = catalog.find((s: { id: string }) => s.id === id)
      expect([name, category, rawUrl]).toEqual([entry.name, entry.category, `${gw.url}/api/agent-skills/${id}/raw`])
    }
    const file = await fetch(table[0]![4]!)
    expect(file.status).toBe(200)
    expect(await file.text()).toContain(`name: ${JSON.stringify(table[0]![1])}`)
  })

  it("takes the A2A 1.0 method name SendMessage, and a plain A2A message without a skill", async () => {
    const v1 = await send(ask, "SendMessage", "req-1")
    expect(v1.body.id).toBe("req-1")
    expect(rows(v1.body.result.artifacts[0].content)).toHaveLength(42)
    const plain = await send({ message: { role: "user", parts: [{ kind: "text", text: "capabilities?" }], messageId: "m1" } })
    expect(rows(plain.body.result.artifacts[0].content)).toHaveLength(42)
  })

  it("answers JSON-RPC errors: parse error, invalid request, unknown method, bad params, unknown skill", async () => {
    const parse = await rpc("{not json")
    expect(parse.status).toBe(200)
    expect(parse.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } })
    expect(parse.body.error.message).toContain("not valid JSON")

    const version = await rpc({ id: 1, method: "message/send", params: ask })
    expect(version.body).toMatchObject({ id: 1, error: { code: -32600 } })
    expect(version.body.error.message).toContain("jsonrpc")

    const method = await send(ask, "tasks/get", 2)
    expect(method.body).toMatchObject({ id: 2, error: { code: -32601 } })
    expect(method.body.error.message).toContain("tasks/get")

    for (const [params, field] of [
      [undefined, "params"],
      [{ skill: 5 }, "params.skill"],
      [{ skill: "list-capabilities", messages: "hi" }, "params.messages"],
      [{ skill: "list-capabilities", messages: [{ content: "hi" }] }, "params.messages[0]"]
    ] as const) {
      const r = await send(params, "message/send", 3)
      expect(r.body, field).toMatchObject({ id: 3, error: { code: -32602 } })
      expect(r.body.error.message).toContain(field)
    }

    const skill = await send({ skill: "rewrite-everything", messages: [] }, "message/send", 4)
    expect(skill.body).toMatchObject({ id: 4, error: { code: -32602, data: { skills: ["list-capabilities"] } } })
    expect(skill.body.error.message).toContain("rewrite-everything")
  })

  it("authenticates like the inference routes: a gateway key once the gateway requires one", async () => {
    await requireKeys(true)
    try {
      const none = await send(ask)
      expect(none.status).toBe(401)
      expect(none.body.error.code).toBe("invalid_api_key")
      const keyed = await rpc({ jsonrpc: "2.0", id: 1, method: "message/send", params: ask }, { authorization: `Bearer ${USER}` })
      expect(keyed.status).toBe(200)
      expect(rows(keyed.body.result.artifacts[0].content)).toHaveLength(42)
      // The card stays public, and says a key is needed.
      const card = await call(`${gw.url}/.well-known/agent-card.json`)
      expect(card.status).toBe(200)
      expect(card.body.security).toEqual([{ gatewayKey: [] }])
    } finally {
      await requireKeys(false)
    }
    expect((await send(ask)).status).toBe(200)
  })
})

describe("the agent card", () => {
  it("is public and names the endpoint on the origin the caller used, the version, capabilities, skills and protocol", async () => {
    const r = await call(`${gw.url}/.well-known/agent-card.json`)
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({
      name: "gateway",
      url: `${gw.url}/a2a`,
      version: r.headers.get("x-gateway-version"),
      protocolVersion: "0.3.0",
      capabilities: { streaming: false, pushNotifications: false }
    })
    expect(r.body.description.length).toBeGreaterThan(20)
    expect(r.body.skills.map((s: { id: string }) => s.id)).toEqual(["list-capabilities"])
    expect(r.body.security).toBeUndefined()

    const named = await rawCall(gw.url, "GET", "/.well-known/agent-card.json", { host: "gateway.example:8443" })
    expect(named.body.url).toBe("http://gateway.example:8443/a2a")
    // A Host header that is not a host name is not echoed: the socket's own address is used.
    const odd = await rawCall(gw.url, "GET", "/.well-known/agent-card.json", { host: "evil.example/<script>" })
    expect(odd.body.url).toBe(`${gw.url}/a2a`)
  })
})

/** Each spawned CLI loads the whole command line; on a busy machine that takes seconds. */
const CLI_TIMEOUT = 120_000

describe("gateway a2a", () => {
  it(
    "card prints the running server's card (--json: the card itself)",
    async () => {
      const json = await runCli(["a2a", "card", "--url", gw.url, "--json"])
      expect(json.code).toBe(0)
      expect(JSON.parse(json.stdout)).toEqual((await call(`${gw.url}/.well-known/agent-card.json`)).body)
      const text = await runCli(["a2a", "card", "--url", gw.url])
      expect(text.code).toBe(0)
      expect(text.stdout).toContain(`endpoint: ${gw.url}/a2a (A2A 0.3.0)`)
      expect(text.stdout).toContain(`interfaces: ${gw.url}/a2a JSONRPC 1.0, ${gw.url}/a2a JSONRPC 0.3`)
      expect(text.stdout).toContain("skills: list-capabilities")
    },
    CLI_TIMEOUT
  )

  it(
    "status says the endpoint answers and how many skills it lists; with keys required it needs one",
    async () => {
      const ok = await runCli(["a2a", "status", "--url", gw.url, "--json"])
      expect(ok.code).toBe(0)
      expect(JSON.parse(ok.stdout)).toMatchObject({ url: gw.url, card: true, endpoint: `${gw.url}/a2a`, answering: true, skills: 42 })
      await requireKeys(true)
      try {
        const refused = await runCli(["a2a", "status", "--url", gw.url])
        expect(refused.code).toBe(1)
        expect(refused.stdout).toContain("401")
        const keyed = await runCli(["a2a", "status", "--url", gw.url], { GATEWAY_API_KEY: USER })
        expect(keyed.code).toBe(0)
        expect(keyed.stdout).toContain("list-capabilities lists 42 skills")
      } finally {
        await requireKeys(false)
      }
    },
    CLI_TIMEOUT
  )

  it(
    "status sends the key only to the server it asked, not to another host a card names",
    async () => {
      // A card server on another port whose card points at the gateway: a different origin.
      const card = (await call(`${gw.url}/.well-known/agent-card.json`)).body
      const other = http.createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(card)))
      await new Promise<void>((r) => other.listen(0, "127.0.0.1", r))
      const otherUrl = `http://127.0.0.1:${(other.address() as net.AddressInfo).port}`
      await requireKeys(true)
      try {
        const r = await runCli(["a2a", "status", "--url", otherUrl, "--api-key", USER])
        expect(r.code).toBe(1)
        expect(r.stdout).toContain("401")
      } finally {
        await requireKeys(false)
        await new Promise((r) => other.close(r))
      }
    },
    CLI_TIMEOUT
  )

  it(
    "status and card exit 1 when nothing answers",
    async () => {
      const url = `http://127.0.0.1:${await refusedPort()}`
      const status = await runCli(["a2a", "status", "--url", url, "--json"])
      expect(status.code).toBe(1)
      expect(JSON.parse(status.stdout)).toMatchObject({ url, card: false, answering: false })
      const card = await runCli(["a2a", "card", "--url", url])
      expect(card.code).toBe(1)
      expect(card.stderr).toContain("no gateway answers")
    },
    CLI_TIMEOUT
  )
})

describe("the official A2A clients (@a2a-js/sdk): 1.0, its 0.3 transport, and the 0.3 SDK", () => {
  const message = (text: string) => ({
    tenant: "",
    configuration: undefined,
    metadata: undefined,
    message: {
      messageId: crypto.randomUUID(),
      contextId: "",
      taskId: "",
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "text" as const, value: text }, metadata: undefined, filename: "", mediaType: "" }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: []
    }
  })
  const keyed =
    (key: string): typeof fetch =>
    (input, init = {}) =>
      fetch(input, { ...init, headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${key}` } })
  /** The table a 1.0 result carries: its task's first artifact's first text part. */
  const tableOf = (result: Awaited<ReturnType<Client["sendMessage"]>>) => {
    expect("messageId" in result).toBe(false)
    const task = result as Extract<typeof result, { status?: unknown }>
    expect(TaskState[task.status!.state]).toBe("TASK_STATE_COMPLETED")
    const part = task.artifacts[0]!.parts[0]!.content
    expect(part?.$case).toBe("text")
    return part?.$case === "text" ? part.value : ""
  }

  it("the 1.0 client finds its transport in the card, sends SendMessage with A2A-Version 1.0, and reads the task", async () => {
    const client = await new ClientFactory().createFromUrl(gw.url)
    const table = tableOf(await client.sendMessage(message("What can you do?")))
    expect(rows(table)).toHaveLength(42)
    // The wire: the 1.0 shape, answered by the header.
    const raw = await rpc(
      { jsonrpc: "2.0", id: 9, method: "SendMessage", params: { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "hi" }] } } },
      { "a2a-version": "1.0" }
    )
    expect(raw.headers.get("a2a-version")).toBe("1.0")
    expect(raw.body.result.kind).toBeUndefined()
    expect(raw.body.result.task).toMatchObject({
      status: { state: "TASK_STATE_COMPLETED" },
      artifacts: [{ name: "capabilities", parts: [{ mediaType: "text/markdown" }] }]
    })
  })

  it("with keys required, the 1.0 client authenticates through its fetch, and without a key gets the 401", async () => {
    await requireKeys(true)
    try {
      const factory = new ClientFactory(
        ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
          transports: [new JsonRpcTransportFactory({ fetchImpl: keyed(USER) })]
        })
      )
      expect(rows(tableOf(await (await factory.createFromUrl(gw.url)).sendMessage(message("hi"))))).toHaveLength(42)
      const bare = await new ClientFactory().createFromUrl(gw.url)
      await expect(bare.sendMessage(message("hi"))).rejects.toThrow(/401/)
    } finally {
      await requireKeys(false)
    }
  })

  it("the 1.0 package's 0.3 transport sends message/send with A2A-Version 0.3 and reads the 0.3 task", async () => {
    const card = await new DefaultAgentCardResolver({ legacyCompat: { enabled: true } }).resolve(gw.url)
    const v03 = card.supportedInterfaces.find((i) => i.protocolVersion === "0.3")!
    expect(v03.url).toBe(`${gw.url}/a2a`)
    const client = new Client(new LegacyJsonRpcTransport({ endpoint: v03.url, fetchImpl: fetch }), card)
    expect(rows(tableOf(await client.sendMessage(message("hi"))))).toHaveLength(42)
  })

  it("the 0.3 SDK (0.3.14) reads the card's 0.3 fields, sends no version header, and reads the 0.3 task", async () => {
    const client = await A2AClient.fromCardUrl(`${gw.url}/.well-known/agent-card.json`)
    const answer = await client.sendMessage({
      message: { kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "What can you do?" }] }
    })
    expect("error" in answer).toBe(false)
    const task = (
      answer as { result: { kind: string; status: { state: string }; artifacts: Array<{ parts: Array<{ kind: string; text: string }> }> } }
    ).result
    expect(task.kind).toBe("task")
    expect(task.status.state).toBe("completed")
    expect(rows(task.artifacts[0]!.parts[0]!.text)).toHaveLength(42)
  })

  it("an A2A-Version it does not speak is the JSON-RPC error -32009 (VersionNotSupported); 0.3.0, 1.0.0 and spaces are the same versions", async () => {
    const r = await rpc({ jsonrpc: "2.0", id: 5, method: "SendMessage", params: ask }, { "a2a-version": "2.0" })
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ id: 5, error: { code: -32009, data: { supportedVersions: ["0.3", "1.0"] } } })
    expect(r.body.error.message).toContain('"2.0" is not supported')
    for (const v of ["0.3.0", "1.0.0", " 1.0 "])
      expect((await rpc({ jsonrpc: "2.0", id: 6, method: "SendMessage", params: ask }, { "a2a-version": v })).body.result, v).toBeDefined()
  })

  it("the card carries both versions' fields: supportedInterfaces for 1.0 beside url and preferredTransport for 0.3", async () => {
    const card = (await call(`${gw.url}/.well-known/agent-card.json`)).body
    expect(card.supportedInterfaces).toEqual([
      { url: `${gw.url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url: `${gw.url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "0.3" }
    ])
    expect(card).toMatchObject({ url: `${gw.url}/a2a`, preferredTransport: "JSONRPC", protocolVersion: "0.3.0" })
    expect(card.securitySchemes.gatewayKey).toMatchObject({ type: "http", scheme: "bearer", httpAuthSecurityScheme: { scheme: "bearer" } })
    await requireKeys(true)
    try {
      const keyedCard = (await call(`${gw.url}/.well-known/agent-card.json`)).body
      expect(keyedCard.securityRequirements).toEqual([{ schemes: { gatewayKey: { list: [] } } }])
      expect(keyedCard.security).toEqual([{ gatewayKey: [] }])
    } finally {
      await requireKeys(false)
    }
  })
})
