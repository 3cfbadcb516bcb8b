/**
 * MCP tools in model requests (docs/mcp.md, "MCP tools in model requests"): a Responses request
 * with `{type: "mcp", server_label}` tools, made with the official openai client against the real
 * gateway, whose model is a fake upstream of another family (OpenAI chat, Anthropic messages)
 * scripted to call the tools, and whose MCP server is the reference "everything" server over
 * stdio. The gateway lists the tools, offers them as functions, runs the calls, feeds the results
 * back and answers with the Responses API's MCP items, whole and streamed; approvals; refusals.
 */
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import path from "node:path"
import { describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { McpServers } from "../src/services/mcp/McpServers.js"
import { functionNameOf } from "../src/inference/mcp/responsesTools.js"
import { queryDb } from "./support/db.js"
import { connectFamilies, gatewayForFile } from "./support/families.js"
import type { Recorded } from "./support/fakeUpstream.js"
import { mcpListed } from "./support/mcpListed.js"

const root = path.resolve(import.meta.dirname, "..")
const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const ADMIN = "sk-mcp-responses-admin-0123456789"
const KEY = "sk-mcp-responses-client-0123456789"
const MAX_ROUNDS = 4

const h = gatewayForFile({
  admin: ADMIN,
  keys: [KEY],
  env: { GATEWAY_MCP_MAX_TOOL_ROUNDS: String(MAX_ROUNDS) },
  setup: async (gw, up) => {
    await connectFamilies(gw.url, up, ADMIN)
    await gw.run(
      Effect.flatMap(McpServers, (s) =>
        s.create({ name: "ev", transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"], allowedTools: ["*"] })
      )
    )
    await mcpListed(gw.run, "ev")
  }
})

const client = (key = KEY) => new OpenAI({ apiKey: key, baseURL: `${h.gw.url}/v1`, maxRetries: 0 })
const EV = { type: "mcp", server_label: "ev", require_approval: "never" } as const

/** The script: echo, then get-sum, then the answer. */
const scriptTwoCalls = () =>
  h.up.next(
    { toolCalls: [{ name: "ev__echo", arguments: JSON.stringify({ message: "hi from the model" }) }] },
    { toolCalls: [{ name: "ev__get-sum", arguments: JSON.stringify({ a: 2, b: 3 }) }] },
    { content: "The echo said hi and the sum is 5." }
  )

/** What a chat request offered as tools and sent back as tool results. */
const chatTools = (r: Recorded): Array<string> => (r.body.tools ?? []).map((t: any) => t.function?.name ?? t.type)
const chatResults = (r: Recorded): Array<string> =>
  (r.body.messages ?? [])
    .filter((m: any) => m.role === "tool")
    .map((m: any) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)))

const mcpCalls = (output: ReadonlyArray<any>) => output.filter((o) => o.type === "mcp_call")

describe("MCP tools in a Responses request, for a chat-format model", () => {
  it("lists the tools, runs the model's two calls through the server, feeds the results back and answers", async () => {
    scriptTwoCalls()
    const { data: res, response } = await client()
      .responses.create({ model: "up-chat/m1", input: "Echo hi, then add 2 and 3.", tools: [EV] })
      .withResponse()
    expect(res.output.map((o) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "mcp_call", "message"])
    const list = res.output[0] as any
    expect(list.server_label).toBe("ev")
    const names = list.tools.map((t: any) => t.name)
    expect(names).toEqual(expect.arrayContaining(["echo", "get-sum"]))
    expect(list.tools.find((t: any) => t.name === "get-sum")).toMatchObject({
      input_schema: { type: "object", properties: { a: expect.anything(), b: expect.anything() } },
      annotations: { readOnlyHint: true }
    })
    const [echo, sum] = mcpCalls(res.output)
    expect(echo).toMatchObject({ server_label: "ev", name: "echo", error: null, status: "completed" })
    expect(JSON.parse(echo.arguments)).toEqual({ message: "hi from the model" })
    expect(echo.output).toBe("Echo: hi from the model")
    expect(sum).toMatchObject({ server_label: "ev", name: "get-sum", error: null })
    expect(sum.output).toContain("5")
    expect(res.output_text).toBe("The echo said hi and the sum is 5.")
    expect(res.status).toBe("completed")
    // The rounds' usage summed (the fake answers 11 in, 7 out each).
    expect(res.usage).toMatchObject({ input_tokens: 33, output_tokens: 21, total_tokens: 54 })

    // The model saw function tools and function results, never the MCP tool or the server's address.
    const rounds = h.up.requestsOf("openai-chat")
    expect(rounds).toHaveLength(3)
    for (const r of rounds) {
      expect(chatTools(r)).toEqual(expect.arrayContaining(["ev__echo", "ev__get-sum"]))
      expect(r.body.tools.every((t: any) => t.type === "function")).toBe(true)
      const text = JSON.stringify(r.body)
      expect(text).not.toContain("server-everything")
      expect(text).not.toContain(process.execPath)
      expect(text).not.toContain('"mcp"')
    }
    expect(chatResults(rounds[1]!)).toEqual(["Echo: hi from the model"])
    expect(chatResults(rounds[2]!)).toEqual(["Echo: hi from the model", expect.stringContaining("5")])

    // Each round wrote its usage row, on the client's key.
    const id = response.headers.get("x-gateway-request-id")!
    await h.gw.usageWritten()
    const rows = queryDb<{ request_id: string; tokens_in: number; api_key_id: string }>(
      h.gw.dataDir,
      "SELECT request_id, tokens_in, api_key_id FROM usage WHERE request_id LIKE ? ORDER BY request_id",
      `${id}_mcp%`
    )
    expect(rows.map((r) => r.request_id)).toEqual([`${id}_mcp1`, `${id}_mcp2`, `${id}_mcp3`])
    expect(new Set(rows.map((r) => r.api_key_id)).size).toBe(1)
    expect(rows[0]!.api_key_id).not.toBeNull()
  })

  it("streams the MCP items' events, then the answer's text, ending with response.completed holding every item", async () => {
    scriptTwoCalls()
    const stream = await client().responses.create({ model: "up-chat/m1", input: "Echo hi, then add 2 and 3.", tools: [EV], stream: true })
    const types: Array<string> = []
    let completed: any
    let text = ""
    for await (const ev of stream) {
      types.push(ev.type)
      if (ev.type === "response.output_text.delta") text += ev.delta
      if (ev.type === "response.completed") completed = ev.response
    }
    const call = [
      "response.output_item.added",
      "response.mcp_call_arguments.delta",
      "response.mcp_call_arguments.done",
      "response.mcp_call.in_progress",
      "response.mcp_call.completed",
      "response.output_item.done"
    ]
    expect(types.slice(0, 6)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.mcp_list_tools.in_progress",
      "response.mcp_list_tools.completed",
      "response.output_item.done"
    ])
    expect(types.slice(6, 18)).toEqual([...call, ...call])
    expect(types).toContain("response.output_text.delta")
    expect(types.at(-1)).toBe("response.completed")
    expect(text).toBe("The echo said hi and the sum is 5.")
    expect(completed.output.map((o: any) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "mcp_call", "message"])
    expect(mcpCalls(completed.output).map((c: any) => c.output)).toEqual(["Echo: hi from the model", expect.stringContaining("5")])
    expect(completed.usage).toMatchObject({ input_tokens: 33, output_tokens: 21 })
  })

  it("works with the client's responses.stream helper", async () => {
    scriptTwoCalls()
    const stream = client().responses.stream({ model: "up-chat/m1", input: "Echo hi, then add 2 and 3.", tools: [EV] })
    const final = await stream.finalResponse()
    expect(final.output.map((o) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "mcp_call", "message"])
    expect(final.output_text).toBe("The echo said hi and the sum is 5.")
  })

  it("answers 400 naming a server_label no server has, and one whose server_url is not the server's", async () => {
    const refused = await client()
      .responses.create({ model: "up-chat/m1", input: "hi", tools: [{ type: "mcp", server_label: "nope", require_approval: "never" }] })
      .catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError)
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).message).toContain('"nope"')
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("tools[0].server_label")
    const url = await client()
      .responses.create({
        model: "up-chat/m1",
        input: "hi",
        tools: [{ type: "mcp", server_label: "ev", server_url: "https://mcp.example.com/mcp", require_approval: "never" }]
      })
      .catch((e: unknown) => e)
    expect(url).toBeInstanceOf(OpenAI.BadRequestError)
    expect((url as Error).message).toContain("https://mcp.example.com/mcp")
    expect(h.up.requests).toHaveLength(0)
  })

  it("answers 403 when the key's mcp.allow does not reach the server", async () => {
    const other = "sk-mcp-responses-narrow-0123456789"
    await h.gw.run(
      Effect.flatMap(ApiKeys, (k) => k.create({ name: "narrow", mcp: { allow: ["other-server"] } } as never, { secret: other }))
    )
    const refused = await client(other)
      .responses.create({ model: "up-chat/m1", input: "hi", tools: [EV] })
      .catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError)
    expect((refused as Error).message).toContain("mcp.allow")
  })

  it("offers only the request's allowed_tools", async () => {
    h.up.next({ content: "nothing to do" })
    const res = await client().responses.create({
      model: "up-chat/m1",
      input: "hi",
      tools: [{ ...EV, allowed_tools: ["echo"] }]
    })
    expect((res.output[0] as any).tools.map((t: any) => t.name)).toEqual(["echo"])
    expect(chatTools(h.up.requestsOf("openai-chat")[0]!)).toEqual(["ev__echo"])
  })

  it("asks for approval by default, and a follow-up approving it runs the call and goes on", async () => {
    h.up.next({ toolCalls: [{ name: "ev__echo", arguments: JSON.stringify({ message: "may I?" }) }] })
    const first = await client().responses.create({
      model: "up-chat/m1",
      input: "Echo 'may I?'",
      tools: [{ type: "mcp", server_label: "ev", require_approval: "always" }]
    })
    expect(first.output.map((o) => o.type)).toEqual(["mcp_list_tools", "mcp_approval_request"])
    const request = first.output[1] as any
    expect(request).toMatchObject({ server_label: "ev", name: "echo" })
    expect(JSON.parse(request.arguments)).toEqual({ message: "may I?" })
    expect(h.up.requestsOf("openai-chat")).toHaveLength(1)

    h.up.next({ content: "It echoed: may I?" })
    const second = await client().responses.create({
      model: "up-chat/m1",
      previous_response_id: first.id,
      input: [{ type: "mcp_approval_response", approval_request_id: request.id, approve: true }],
      tools: [{ type: "mcp", server_label: "ev", require_approval: "always" }]
    })
    // The conversation listed the tools already: no second listing (as the Responses API does).
    expect(second.output.map((o) => o.type)).toEqual(["mcp_call", "message"])
    expect(second.output[0]).toMatchObject({ name: "echo", output: "Echo: may I?", approval_request_id: request.id })
    expect(second.output_text).toBe("It echoed: may I?")
    const round = h.up.requestsOf("openai-chat")[1]!
    expect(chatResults(round)).toEqual(["Echo: may I?"])
  })

  it("tells the model when the client refuses a call, without running it", async () => {
    h.up.next({ toolCalls: [{ name: "ev__echo", arguments: JSON.stringify({ message: "no" }) }] })
    const first = await client().responses.create({ model: "up-chat/m1", input: "Echo no", tools: [{ type: "mcp", server_label: "ev" }] })
    const request = first.output.find((o) => o.type === "mcp_approval_request") as any
    expect(request).toBeDefined()
    h.up.next({ content: "You did not let me." })
    const second = await client().responses.create({
      model: "up-chat/m1",
      input: [...(first.output as Array<any>), { type: "mcp_approval_response", approval_request_id: request.id, approve: false }],
      tools: [{ type: "mcp", server_label: "ev" }]
    })
    expect(second.output.map((o) => o.type)).toEqual(["message"])
    expect(chatResults(h.up.requestsOf("openai-chat")[1]!)).toEqual([expect.stringContaining("did not approve")])
  })

  it("stops at GATEWAY_MCP_MAX_TOOL_ROUNDS with an incomplete answer", async () => {
    h.up.always({ toolCalls: [{ name: "ev__echo", arguments: JSON.stringify({ message: "again" }) }] })
    const res = await client().responses.create({ model: "up-chat/m1", input: "loop", tools: [EV] })
    expect(res.status).toBe("incomplete")
    expect(res.incomplete_details?.reason).toBe("max_tool_rounds")
    expect(h.up.requestsOf("openai-chat")).toHaveLength(MAX_ROUNDS)
    const calls = mcpCalls(res.output)
    expect(calls).toHaveLength(MAX_ROUNDS)
    expect(calls.slice(0, -1).every((c: any) => c.output === "Echo: again")).toBe(true)
    expect(calls.at(-1).error.message).toContain("GATEWAY_MCP_MAX_TOOL_ROUNDS")
  })

  it("maps tool_choice {type: mcp} to the tool's function for the first round, and max_tool_calls caps the calls run", async () => {
    h.up.next(
      {
        toolCalls: [
          { name: "ev__echo", arguments: JSON.stringify({ message: "one" }) },
          { name: "ev__echo", arguments: JSON.stringify({ message: "two" }) }
        ]
      },
      { content: "done" }
    )
    const res = await client().responses.create({
      model: "up-chat/m1",
      input: "echo twice",
      tools: [EV],
      tool_choice: { type: "mcp", server_label: "ev", name: "echo" },
      max_tool_calls: 1
    })
    expect(mcpCalls(res.output).map((c: any) => c.output)).toEqual(["Echo: one"])
    const [first, second] = h.up.requestsOf("openai-chat")
    expect(first!.body.tool_choice).toEqual({ type: "function", function: { name: "ev__echo" } })
    expect(second!.body.tool_choice).toBe("none")
    expect(chatResults(second!)).toEqual(["Echo: one", expect.stringContaining("max_tool_calls")])
  })

  it("returns the calls of the client's own function tools alongside, and stops there", async () => {
    h.up.next({
      toolCalls: [
        { name: "ev__echo", arguments: JSON.stringify({ message: "mine" }) },
        { name: "lookup", arguments: JSON.stringify({ q: "x" }) }
      ]
    })
    const res = await client().responses.create({
      model: "up-chat/m1",
      input: "both",
      tools: [
        EV,
        { type: "function", name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } } }, strict: false }
      ]
    })
    expect(res.output.map((o) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "function_call"])
    expect(res.output[2]).toMatchObject({ name: "lookup" })
    expect(h.up.requestsOf("openai-chat")).toHaveLength(1)
  })
})

describe("MCP tools in a Responses request, for an Anthropic-messages model", () => {
  it("runs the calls the model makes and answers, the model reading tool_use and tool_result blocks", async () => {
    scriptTwoCalls()
    const res = await client().responses.create({ model: "up-anth/m1", input: "Echo hi, then add 2 and 3.", tools: [EV] })
    expect(res.output.map((o) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "mcp_call", "message"])
    expect(mcpCalls(res.output)[0].output).toBe("Echo: hi from the model")
    expect(res.output_text).toBe("The echo said hi and the sum is 5.")
    const rounds = h.up.requestsOf("anthropic")
    expect(rounds).toHaveLength(3)
    expect(rounds[0]!.body.tools.map((t: any) => t.name)).toEqual(expect.arrayContaining(["ev__echo", "ev__get-sum"]))
    const results = rounds[2]!.body.messages.flatMap((m: any) =>
      Array.isArray(m.content) ? m.content.filter((b: any) => b.type === "tool_result") : []
    )
    expect(results).toHaveLength(2)
    expect(JSON.stringify(results[0])).toContain("Echo: hi from the model")
    expect(JSON.stringify(rounds)).not.toContain("server-everything")
  })
})

describe("MCP tools in a Responses request, for an OpenAI Responses model", () => {
  it("runs the loop in the gateway too: the upstream gets function tools, never the mcp tool", async () => {
    scriptTwoCalls()
    const res = await client().responses.create({ model: "up-resp/m1", input: "Echo hi, then add 2 and 3.", tools: [EV] })
    expect(res.output.map((o) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "mcp_call", "message"])
    expect(res.output_text).toBe("The echo said hi and the sum is 5.")
    const rounds = h.up.requestsOf("openai-responses")
    expect(rounds).toHaveLength(3)
    for (const r of rounds) {
      expect(r.body.tools.map((t: any) => t.type)).toEqual(r.body.tools.map(() => "function"))
      expect(r.body.tools.map((t: any) => t.name)).toEqual(expect.arrayContaining(["ev__echo", "ev__get-sum"]))
    }
    const outputs = rounds[2]!.body.input.filter((i: any) => i.type === "function_call_output").map((i: any) => i.output)
    expect(outputs).toEqual(["Echo: hi from the model", expect.stringContaining("5")])
    expect(h.up.violations).toEqual([])
  })
})

describe("MCP tools in a Responses request, for a Gemini generate-content model", () => {
  it("runs the calls the model makes and answers, the model reading functionCall and functionResponse parts", async () => {
    scriptTwoCalls()
    const res = await client().responses.create({ model: "up-gem/m1", input: "Echo hi, then add 2 and 3.", tools: [EV] })
    expect(res.output.map((o) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "mcp_call", "message"])
    expect(mcpCalls(res.output)[0].output).toBe("Echo: hi from the model")
    expect(res.output_text).toBe("The echo said hi and the sum is 5.")
    const rounds = h.up.requestsOf("gemini")
    expect(rounds).toHaveLength(3)
    const declared = rounds[0]!.body.tools.flatMap((t: any) => (t.functionDeclarations ?? []).map((d: any) => d.name))
    expect(declared).toEqual(expect.arrayContaining(["ev__echo", "ev__get-sum"]))
    const responses = rounds[2]!.body.contents.flatMap((c: any) => (c.parts ?? []).filter((p: any) => p.functionResponse))
    expect(responses).toHaveLength(2)
    expect(JSON.stringify(responses[0])).toContain("Echo: hi from the model")
    expect(JSON.stringify(rounds)).not.toContain("server-everything")
  })

  it("streams the MCP items and the answer", async () => {
    scriptTwoCalls()
    const stream = await client().responses.create({ model: "up-gem/m1", input: "Echo hi, then add 2 and 3.", tools: [EV], stream: true })
    let completed: any
    let text = ""
    for await (const e of stream) {
      if (e.type === "response.output_text.delta") text += e.delta
      if (e.type === "response.completed") completed = e.response
    }
    expect(text).toBe("The echo said hi and the sum is 5.")
    expect(completed.output.map((o: any) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "mcp_call", "message"])
  })
})

describe("MCP tools in a Responses request, a server whose name starts with a digit", () => {
  it("is offered to Gemini under function names Gemini takes (a letter or _ first), and its calls run", async () => {
    await h.gw.run(
      Effect.flatMap(McpServers, (s) =>
        s.create({ name: "9ev", transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"], allowedTools: ["echo"] })
      )
    )
    await mcpListed(h.gw.run, "9ev")
    const fn = functionNameOf("9ev", "echo")
    expect(fn).toMatch(/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/)
    h.up.next({ toolCalls: [{ name: fn, arguments: JSON.stringify({ message: "from a digit" }) }] }, { content: "done" })
    const res = await client().responses.create({
      model: "up-gem/m1",
      input: "Echo.",
      tools: [{ type: "mcp", server_label: "9ev", require_approval: "never" }]
    })
    const declared = h.up.requestsOf("gemini")[0]!.body.tools.flatMap((t: any) => (t.functionDeclarations ?? []).map((d: any) => d.name))
    expect(declared).toEqual([fn])
    expect(mcpCalls(res.output)).toMatchObject([{ server_label: "9ev", name: "echo", output: "Echo: from a digit" }])
    expect(res.output_text).toBe("done")
  })
})

describe("MCP tools in a Responses request, for a local runner (Ollama) model", () => {
  it("runs the calls the model makes and answers, whole and streamed", async () => {
    scriptTwoCalls()
    const res = await client().responses.create({ model: "up-oll/m1", input: "Echo hi, then add 2 and 3.", tools: [EV] })
    expect(res.output.map((o) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "mcp_call", "message"])
    expect(mcpCalls(res.output)[1].output).toContain("5")
    expect(res.output_text).toBe("The echo said hi and the sum is 5.")
    const rounds = h.up.requestsOf("ollama")
    expect(rounds).toHaveLength(3)
    expect(rounds[0]!.body.tools.map((t: any) => t.function?.name)).toEqual(expect.arrayContaining(["ev__echo", "ev__get-sum"]))
    const results = rounds[2]!.body.messages.filter((m: any) => m.role === "tool")
    expect(results).toHaveLength(2)
    expect(JSON.stringify(results[0])).toContain("Echo: hi from the model")

    scriptTwoCalls()
    const stream = await client().responses.create({ model: "up-oll/m1", input: "Echo hi, then add 2 and 3.", tools: [EV], stream: true })
    let completed: any
    for await (const e of stream) if (e.type === "response.completed") completed = e.response
    expect(completed.output.map((o: any) => o.type)).toEqual(["mcp_list_tools", "mcp_call", "mcp_call", "message"])
    expect(completed.output.at(-1).content[0].text).toBe("The echo said hi and the sum is 5.")
  })
})
