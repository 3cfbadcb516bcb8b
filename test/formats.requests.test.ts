import { describe, expect, it } from "vitest"
import { anthropic, encodeAnthropicRequest } from "../src/upstream/formats/anthropic.js"
import type { CanonicalRequest, Message } from "../src/domain/canonical.js"
import { idWithSignature, repairToolHistory } from "../src/upstream/formats/common.js"
import { encodeGeminiRequest, gemini, SKIP_SIGNATURE } from "../src/upstream/formats/gemini.js"
import { sanitizeGeminiSchema } from "../src/upstream/formats/gemini-schema.js"
import { ollama } from "../src/upstream/formats/ollama.js"
import { encodeChatRequest, openAiChat } from "../src/upstream/formats/openai-chat.js"
import { encodeResponsesRequest, openAiResponses } from "../src/upstream/formats/openai-responses.js"
import { countRequestTokens, imageSize } from "../src/upstream/formats/tokens.js"
import { NO_QUIRKS } from "../src/upstream/formats/format.js"
import { findProvider } from "../src/domain/catalog/catalog.js"

const base: CanonicalRequest = { model: "m", system: [], messages: [], tools: [], stream: false }
const weatherTool = {
  name: "get_weather",
  description: "Weather",
  parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] }
}

/** A chat-format conversation with one tool round trip, as opencode/Qwen/Kilo send it. */
const chatRoundTrip = {
  model: "m",
  messages: [
    { role: "system", content: "be brief" },
    { role: "user", content: "weather in Paris?" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"location":"Paris"}' } }]
    },
    { role: "tool", tool_call_id: "call_1", content: [{ type: "text", text: "sunny" }] },
    { role: "user", content: "and tomorrow?" }
  ],
  tools: [{ type: "function", function: weatherTool }]
}

describe("tool history stays valid in every target format", () => {
  it("puts each result right after its call and keeps ids paired, in chat, messages, responses, gemini and ollama", () => {
    const req = openAiChat.decodeRequest(chatRoundTrip)
    const chat = encodeChatRequest(req).messages as Array<Record<string, unknown>>
    expect(chat.map((m) => m["role"])).toEqual(["system", "user", "assistant", "tool", "user"])
    expect(chat[3]).toMatchObject({ tool_call_id: "call_1", content: "sunny" })

    const msgs = encodeAnthropicRequest(req).messages as Array<{ role: string; content: Array<Record<string, unknown>> }>
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "user"])
    expect(msgs[1]!.content[0]).toMatchObject({ type: "tool_use", id: "call_1", name: "get_weather", input: { location: "Paris" } })
    expect(msgs[2]!.content[0]).toMatchObject({ type: "tool_result", tool_use_id: "call_1" })
    expect(msgs[2]!.content[1]).toMatchObject({ type: "text", text: "and tomorrow?" })

    const input = encodeResponsesRequest(req).input as Array<Record<string, unknown>>
    expect(input.map((i) => i["type"])).toEqual(["message", "function_call", "function_call_output", "message"])
    expect(input[2]).toMatchObject({ call_id: "call_1", output: "sunny" })

    const contents = encodeGeminiRequest(req).contents as Array<{ role: string; parts: Array<Record<string, unknown>> }>
    expect(contents.map((c) => c.role)).toEqual(["user", "model", "user"])
    expect(contents[2]!.parts[0]).toMatchObject({ functionResponse: { name: "get_weather", response: { result: "sunny" } } })

    const ollamaMessages = ollama.encodeRequest(req).messages as Array<Record<string, unknown>>
    expect(ollamaMessages.map((m) => m["role"])).toEqual(["system", "user", "assistant", "tool", "user"])
    expect(ollamaMessages[2]!["tool_calls"]).toEqual([{ function: { name: "get_weather", arguments: { location: "Paris" } } }])
    expect(ollamaMessages[3]).toMatchObject({ tool_name: "get_weather", content: "sunny" })
  })

  it("turns an orphan result into text and answers a call that got no result", () => {
    const messages: Array<Message> = [
      { role: "user", content: [{ type: "text", text: "go" }] },
      { role: "tool", content: [{ type: "tool_result", toolUseId: "ghost", content: [{ type: "text", text: "from nowhere" }] }] },
      {
        role: "assistant",
        content: [
          { type: "tool_use", id: "c1", name: "a", input: {} },
          { type: "tool_use", id: "c2", name: "b", input: {} }
        ]
      },
      { role: "tool", content: [{ type: "tool_result", toolUseId: "c2", content: [{ type: "text", text: "b done" }] }] },
      { role: "user", content: [{ type: "text", text: "next" }] }
    ]
    const repaired = repairToolHistory(messages)
    expect(repaired.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user"])
    expect(repaired[0]!.content.map((b) => (b.type === "text" ? b.text : b.type))).toEqual([
      "go",
      "Result of tool call ghost: from nowhere"
    ])
    const results = repaired[2]!.content
    expect(results.map((r) => r.type === "tool_result" && [r.toolUseId, r.name, r.isError ?? false])).toEqual([
      ["c1", "a", true],
      ["c2", "b", false]
    ])
    // Anthropic accepts the repaired history: results in one user turn right after the calls.
    const body = encodeAnthropicRequest({ ...base, messages })
    const roles = (body.messages as Array<{ role: string }>).map((m) => m.role)
    expect(roles).toEqual(["user", "assistant", "user"])
  })

  it("reads a tool result whose content is an array of text parts (Qwen Code)", () => {
    const req = openAiChat.decodeRequest(chatRoundTrip)
    const tool = req.messages.find((m) => m.role === "tool")!
    expect(tool.content[0]).toMatchObject({
      type: "tool_result",
      toolUseId: "call_1",
      name: "get_weather",
      content: [{ type: "text", text: "sunny" }]
    })
  })
})

describe("Anthropic specifics", () => {
  it("moves a role: system message inside messages (Claude Code) into system, in translation and in pass-through", () => {
    const body = {
      model: "claude-opus-5-5",
      max_tokens: 1000,
      system: [{ type: "text", text: "You are Claude." }],
      messages: [
        { role: "user", content: [{ type: "text", text: "say hi" }] },
        {
          role: "system",
          content: [{ type: "text", text: "# Environment", cache_control: { type: "ephemeral" } }],
          output_config: { effort: "medium" }
        }
      ]
    }
    const req = anthropic.decodeRequest(body)
    expect(req.system.map((b) => b.text)).toEqual(["You are Claude.", "# Environment"])
    expect(req.messages.map((m) => m.role)).toEqual(["user"])
    const passed = anthropic.passthroughBody(body, NO_QUIRKS)
    expect((passed["messages"] as Array<{ role: string }>).map((m) => m.role)).toEqual(["user"])
    expect((passed["system"] as Array<{ text: string }>).map((b) => b.text)).toEqual(["You are Claude.", "# Environment"])
  })

  it("keeps thinking on when every tool-use turn carries signed thinking, and turns it off when one does not", () => {
    const thinkingReq = (signature?: string): CanonicalRequest => ({
      ...base,
      maxTokens: 32000,
      reasoning: { enabled: true, budgetTokens: 4000 },
      tools: [weatherTool],
      messages: [
        { role: "user", content: [{ type: "text", text: "weather?" }] },
        {
          role: "assistant",
          content: [
            { type: "reasoning", text: "use the tool", ...(signature ? { signature } : {}) },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { location: "Paris" } }
          ]
        },
        { role: "tool", content: [{ type: "tool_result", toolUseId: "toolu_1", content: [{ type: "text", text: "sunny" }] }] }
      ]
    })
    const signed = encodeAnthropicRequest(thinkingReq("SIG123"))
    expect(signed["thinking"]).toEqual({ type: "enabled", budget_tokens: 4000 })
    expect((signed.messages as Array<{ content: Array<Record<string, unknown>> }>)[1]!.content[0]).toEqual({
      type: "thinking",
      thinking: "use the tool",
      signature: "SIG123"
    })
    // Reasoning from another model (no signature) cannot go back: thinking is turned off instead of a 400.
    const unsigned = encodeAnthropicRequest(thinkingReq())
    expect(unsigned["thinking"]).toBeUndefined()
    expect(JSON.stringify(unsigned.messages)).not.toContain("thinking")
  })

  it("always sends max_tokens, and merges consecutive user messages", () => {
    const body = encodeAnthropicRequest({
      ...base,
      messages: [
        { role: "user", content: [{ type: "text", text: "a" }] },
        { role: "user", content: [{ type: "text", text: "b" }] }
      ]
    })
    expect(body["max_tokens"]).toBe(8192)
    expect(body.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b" }
        ]
      }
    ])
  })
})

describe("reasoning signatures across formats", () => {
  it("carries a Gemini thought signature through a chat client's tool-call id and back onto the functionCall", () => {
    const id = idWithSignature("call_9", "CiQBcsjafSIG/+==")
    const req = openAiChat.decodeRequest({
      ...chatRoundTrip,
      messages: [
        { role: "user", content: "list" },
        { role: "assistant", content: null, tool_calls: [{ id, type: "function", function: { name: "ls", arguments: "{}" } }] },
        { role: "tool", tool_call_id: id, content: "a.txt" }
      ]
    })
    const parts = (encodeGeminiRequest(req).contents as Array<{ role: string; parts: Array<Record<string, unknown>> }>)[1]!.parts
    expect(parts[0]).toEqual({ functionCall: { name: "ls", args: {} }, thoughtSignature: "CiQBcsjafSIG/+==" })
  })

  it("gives the first call of a step without a signature Google's bypass value, and only the first", () => {
    const body = encodeGeminiRequest({
      ...base,
      messages: [
        { role: "user", content: [{ type: "text", text: "go" }] },
        {
          role: "assistant",
          content: [
            { type: "tool_use", id: "a", name: "x", input: {} },
            { type: "tool_use", id: "b", name: "y", input: {} }
          ]
        },
        {
          role: "tool",
          content: [
            { type: "tool_result", toolUseId: "a", name: "x", content: [{ type: "text", text: "1" }] },
            { type: "tool_result", toolUseId: "b", name: "y", content: [{ type: "text", text: "2" }] }
          ]
        }
      ]
    })
    const parts = (body.contents as Array<{ parts: Array<Record<string, unknown>> }>)[1]!.parts
    expect(parts.map((p) => p["thoughtSignature"])).toEqual([SKIP_SIGNATURE, undefined])
  })

  it("maps reasoning text to reasoning_content, thinking blocks, thought parts and Ollama thinking", () => {
    const res = {
      id: "r",
      model: "m",
      created: 1,
      stopReason: "end_turn" as const,
      content: [
        { type: "reasoning" as const, text: "hmm", signature: "S" },
        { type: "text" as const, text: "hi" }
      ]
    }
    const ctx = { model: "m", requestId: "q" }
    expect((openAiChat.encodeResponse(res, ctx) as any).choices[0].message).toMatchObject({ reasoning_content: "hmm", content: "hi" })
    expect((anthropic.encodeResponse(res, ctx) as any).content[0]).toEqual({ type: "thinking", thinking: "hmm", signature: "S" })
    expect((gemini.encodeResponse(res, ctx) as any).candidates[0].content.parts[0]).toEqual({
      text: "hmm",
      thought: true,
      thoughtSignature: "S"
    })
    expect((ollama.encodeResponse(res, ctx) as any).message).toMatchObject({ thinking: "hmm", content: "hi" })
    expect((openAiResponses.encodeResponse(res, ctx) as any).output[0]).toMatchObject({
      type: "reasoning",
      summary: [{ type: "summary_text", text: "hmm" }]
    })
  })

  it("echoes reasoning_content on tool-call turns for DeepSeek only", () => {
    const req: CanonicalRequest = {
      ...base,
      messages: [
        { role: "user", content: [{ type: "text", text: "go" }] },
        {
          role: "assistant",
          content: [
            { type: "reasoning", text: "think" },
            { type: "tool_use", id: "c", name: "x", input: {} }
          ]
        },
        { role: "tool", content: [{ type: "tool_result", toolUseId: "c", content: [{ type: "text", text: "ok" }] }] }
      ]
    }
    expect((encodeChatRequest(req, { reasoningContent: true }).messages as Array<any>)[1].reasoning_content).toBe("think")
    expect((encodeChatRequest(req).messages as Array<any>)[1].reasoning_content).toBeUndefined()
  })
})

describe("Responses API strictness", () => {
  it("writes user content as input_text and assistant content as output_text after a tool round trip", () => {
    const req = openAiChat.decodeRequest({
      ...chatRoundTrip,
      messages: [...chatRoundTrip.messages, { role: "assistant", content: "tomorrow: rain" }, { role: "user", content: "thanks" }]
    })
    const input = encodeResponsesRequest(req).input as Array<any>
    for (const item of input.filter((i) => i.type === "message")) {
      const expected = item.role === "assistant" ? "output_text" : "input_text"
      for (const part of item.content) expect(part.type, `${item.role} part`).toBe(expected)
    }
    expect(encodeResponsesRequest(req)["instructions"]).toBe("be brief")
  })

  it("defaults function tools to strict: false (Responses treats missing strict as true)", () => {
    const body = encodeResponsesRequest({
      ...base,
      tools: [weatherTool],
      messages: [{ role: "user", content: [{ type: "text", text: "x" }] }]
    })
    expect(body["tools"]).toEqual([
      { type: "function", name: "get_weather", description: "Weather", parameters: weatherTool.parameters, strict: false }
    ])
  })

  it("strips fields only OpenAI knows before a compatible Responses server, and keeps them for OpenAI", () => {
    const codex = {
      model: "gpt-5",
      input: [
        {
          type: "message",
          role: "user",
          content: [{ type: "input_text", text: "hi" }],
          internal_chat_message_metadata_passthrough: { content_item_kinds: ["user.text"] }
        }
      ],
      tools: [
        { type: "namespace", name: "multi_agent_v1", tools: [] },
        { type: "function", name: "exec_command", parameters: {} }
      ],
      client_metadata: { thread_id: "t" },
      prompt_cache_key: "k",
      store: false
    }
    // The quirks each provider declares in the catalog.
    const compat = openAiResponses.passthroughBody(codex, findProvider("openai-compatible")!.quirks ?? NO_QUIRKS)
    expect(Object.keys(compat).sort()).toEqual(["input", "model", "store", "tools"])
    expect((compat["input"] as Array<any>)[0]).not.toHaveProperty("internal_chat_message_metadata_passthrough")
    expect((compat["tools"] as Array<any>).map((t) => t.type)).toEqual(["function"])
    expect(openAiResponses.passthroughBody(codex, findProvider("openai")!.quirks ?? NO_QUIRKS)).toEqual(codex)
  })

  it("reads string input, typeless items, developer messages and Codex's function_call items", () => {
    const req = openAiResponses.decodeRequest({
      model: "gpt-5",
      input: [
        { type: "message", role: "developer", content: [{ type: "input_text", text: "You are Codex" }] },
        { role: "user", content: "run ls" },
        { type: "function_call", id: "fc_1", status: "completed", call_id: "call_1", name: "exec_command", arguments: '{"cmd":"ls"}' },
        { type: "function_call_output", id: "fco_1", call_id: "call_1", output: "a.txt" }
      ]
    })
    expect(req.system.map((b) => b.text)).toEqual(["You are Codex"])
    expect(req.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"])
    expect(req.messages[1]!.content[0]).toMatchObject({ type: "tool_use", id: "call_1", input: { cmd: "ls" } })
    expect(openAiResponses.decodeRequest({ model: "gpt-5", input: "say hi" }).messages).toEqual([
      { role: "user", content: [{ type: "text", text: "say hi" }] }
    ])
  })
})

describe("Gemini tool-schema sanitising", () => {
  it("rewrites JSON Schema into the subset Gemini accepts", () => {
    const schema = {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      additionalProperties: false,
      $defs: { Point: { type: "object", properties: { x: { type: "number" } }, required: ["x"], additionalProperties: false } },
      properties: {
        where: { $ref: "#/$defs/Point" },
        tags: { type: "array", uniqueItems: true, items: { type: "string" } },
        pair: { type: "array", prefixItems: [{ type: "string" }, { type: "integer" }] },
        anything: { type: "array" },
        maybe: { type: ["string", "null"], description: "free text" },
        reply_to: { anyOf: [{ type: "string" }, { type: "null" }] },
        mode: { const: "fast" },
        fork: {
          oneOf: [
            { type: "string", enum: ["all"] },
            { type: "string", pattern: "^[1-9][0-9]*$" }
          ]
        },
        timeout: { type: "integer", minimum: -9007199254740991, exclusiveMinimum: 0 },
        url: { type: "string", format: "uri" },
        when: { type: "string", format: "date-time" },
        extra: { type: "string", optional: true },
        untyped: { description: "no type" },
        type: { type: "string", enum: ["INFO", "ASK"] }
      },
      required: ["where", "extra", "ghost", "type"]
    }
    const out = sanitizeGeminiSchema(schema) as any
    const text = JSON.stringify(out)
    for (const bad of [
      "$schema",
      "additionalProperties",
      "$ref",
      "$defs",
      "uniqueItems",
      "prefixItems",
      "const",
      "exclusiveMinimum",
      "oneOf",
      "optional",
      '"uri"'
    ]) {
      expect(text, bad).not.toContain(bad)
    }
    expect(out.properties.where).toEqual({ type: "object", properties: { x: { type: "number" } }, required: ["x"] })
    expect(out.properties.tags).toEqual({ type: "array", items: { type: "string" } })
    expect(out.properties.pair).toEqual({ type: "array", items: { type: "string" } })
    expect(out.properties.anything).toEqual({ type: "array", items: { type: "string" } })
    expect(out.properties.maybe).toEqual({ type: "string", nullable: true, description: "free text" })
    expect(out.properties.reply_to).toEqual({ type: "string", nullable: true })
    expect(out.properties.mode).toEqual({ type: "string", enum: ["fast"] })
    expect(out.properties.fork.anyOf).toHaveLength(2)
    expect(out.properties.timeout).toEqual({ type: "integer", minimum: -9007199254740991 })
    expect(out.properties.when.format).toBe("date-time")
    expect(out.properties.untyped).toEqual({ type: "string", description: "no type" })
    // A property named "type" is a property, not the keyword.
    expect(out.properties.type).toEqual({ type: "string", enum: ["INFO", "ASK"] })
    expect(out.required).toEqual(["where", "type"])
  })

  it("leaves out the parameters of a tool that takes none, and lower-cases Gemini's upper-case types when reading them", () => {
    const body = encodeGeminiRequest({
      ...base,
      tools: [{ name: "get_goal", parameters: { type: "object", properties: {}, required: [] } }],
      messages: [{ role: "user", content: [{ type: "text", text: "x" }] }]
    })
    expect((body["tools"] as any)[0].functionDeclarations[0]).toEqual({ name: "get_goal" })
    const req = gemini.decodeRequest({
      model: "gemini-3.5-flash-lite",
      contents: [{ role: "user", parts: [{ text: "route" }] }],
      generationConfig: {
        responseMimeType: "application/json",
        responseJsonSchema: { type: "OBJECT", properties: { score: { type: "INTEGER" } }, required: ["score"] }
      }
    })
    expect(req.responseFormat).toEqual({
      type: "json_schema",
      name: "response",
      schema: { type: "object", properties: { score: { type: "integer" } }, required: ["score"] }
    })
  })
})

describe("usage in every naming", () => {
  it("reads prompt/completion, input/output (with cache) and promptTokenCount/candidates (with thoughts)", () => {
    expect(
      openAiChat.usageOfResponse({ usage: { prompt_tokens: 10, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 4 } } })
    ).toEqual({
      inputTokens: 10,
      outputTokens: 5,
      cachedInputTokens: 4
    })
    expect(
      anthropic.usageOfResponse({
        usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 30, cache_creation_input_tokens: 2 }
      })
    ).toEqual({
      inputTokens: 42,
      outputTokens: 5,
      cachedInputTokens: 30,
      cacheCreationTokens: 2
    })
    expect(gemini.usageOfResponse({ usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, thoughtsTokenCount: 20 } })).toEqual({
      inputTokens: 10,
      outputTokens: 25,
      reasoningTokens: 20
    })
    expect(
      openAiResponses.usageOfResponse({ usage: { input_tokens: 10, output_tokens: 5, output_tokens_details: { reasoning_tokens: 3 } } })
    ).toEqual({
      inputTokens: 10,
      outputTokens: 5,
      reasoningTokens: 3
    })
    expect(ollama.usageOfResponse({ prompt_eval_count: 10, eval_count: 5 })).toEqual({ inputTokens: 10, outputTokens: 5 })
  })

  it("reads usage from the stream frame that carries it, without decoding the others", () => {
    expect(openAiChat.usageOf({ data: '{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}' })).toEqual({
      inputTokens: 3,
      outputTokens: 2
    })
    expect(openAiChat.usageOf({ data: '{"choices":[{"delta":{"content":"x"}}],"usage":null}' })).toBeUndefined()
    expect(anthropic.usageOf({ event: "message_delta", data: '{"type":"message_delta","usage":{"output_tokens":9}}' })).toEqual({
      outputTokens: 9
    })
    expect(ollama.usageOf({ data: '{"done":true,"prompt_eval_count":4,"eval_count":6}' })).toEqual({ inputTokens: 4, outputTokens: 6 })
  })
})

describe("token counting", () => {
  // 2x3 PNG header
  const png = Buffer.concat([
    Buffer.from("89504e470d0a1a0a0000000d49484452", "hex"),
    Buffer.from([0, 0, 0, 200, 0, 0, 1, 44]),
    Buffer.alloc(16)
  ])

  it("reads image sizes from PNG, GIF and JPEG headers", () => {
    expect(imageSize(png)).toEqual({ width: 200, height: 300 })
    expect(imageSize(Buffer.from([0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 10, 0, 20, 0]))).toEqual({ width: 10, height: 20 })
    const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xc0, 0, 17, 8, 0, 50, 0, 100, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    expect(imageSize(jpeg)).toEqual({ width: 100, height: 50 })
  })

  it("counts system, messages, tool calls, tool results, tools and images with a real tokenizer", async () => {
    const text = await countRequestTokens({ ...base, messages: [{ role: "user", content: [{ type: "text", text: "Hello world" }] }] })
    expect(text).toBe(3 + 2) // message framing + "Hello world" (2 tokens in o200k_base)
    const full = await countRequestTokens({
      ...base,
      system: [{ type: "text", text: "You are a careful assistant." }],
      tools: [weatherTool],
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Hello world" },
            { type: "image", source: { kind: "base64", mediaType: "image/png", data: png.toString("base64") } }
          ]
        },
        { role: "assistant", content: [{ type: "tool_use", id: "c", name: "get_weather", input: { location: "Paris" } }] },
        { role: "tool", content: [{ type: "tool_result", toolUseId: "c", content: [{ type: "text", text: "sunny and warm" }] }] }
      ]
    })
    const image = Math.ceil((200 * 300) / 750)
    expect(full).toBeGreaterThan(text + image + 20)
    const noImage = await countRequestTokens({
      ...base,
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Hello world" },
            { type: "image", source: { kind: "url", url: "https://x/y.png" } }
          ]
        }
      ]
    })
    expect(noImage).toBe(text + 1600)
  })
})
