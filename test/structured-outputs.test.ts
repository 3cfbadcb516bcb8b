import Anthropic from "@anthropic-ai/sdk"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { SCHEMA_CORPUS } from "./fixtures/schemas/corpus.js"
import { type Family, FakeUpstream, type Recorded } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Structured outputs that always validate (docs/structured-outputs.md). A corpus of real-world
 * schemas goes to each upstream family, streamed and not; the fake upstreams check each family's
 * own rules for the schema they are sent (OpenAI's strict mode, Anthropic's output_config,
 * Gemini's responseJsonSchema) as the real APIs do. The answer is validated against the client's
 * original schema: `X-Gateway-Schema: valid | repaired | invalid`, one repair attempt when it is
 * not, and the verdict as the last event of a stream.
 */
const ADMIN = "gwk_structured_admin_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream

/** Each upstream family's connection; a client of another format reaches it translated (the schema compiled to its mechanism). */
const TARGETS: ReadonlyArray<{ readonly family: Family; readonly model: string; readonly client: "chat" | "messages" }> = [
  { family: "openai-chat", model: "oai/gpt-x", client: "messages" },
  { family: "openai-responses", model: "resp/gpt-r", client: "chat" },
  { family: "anthropic", model: "anth/claude-x", client: "chat" },
  { family: "gemini", model: "gem/gem-x", client: "chat" },
  { family: "ollama", model: "oll/llama-x", client: "chat" }
]

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await add({ provider: "openai", name: "oai", apiKey: "sk-oai", baseUrl: up.baseUrl("openai-chat"), models: ["gpt-x"] })
  await add({
    provider: "openai-compatible",
    name: "resp",
    upstreamFormat: "openai-responses",
    baseUrl: up.baseUrl("openai-responses"),
    models: ["gpt-r"]
  })
  await add({ provider: "anthropic", name: "anth", apiKey: "sk-ant-upstream", baseUrl: up.baseUrl("anthropic"), models: ["claude-x"] })
  await add({ provider: "gemini", name: "gem", apiKey: "gemini-upstream-key", baseUrl: up.baseUrl("gemini"), models: ["gem-x"] })
  await add({ provider: "ollama", name: "oll", baseUrl: up.baseUrl("ollama"), models: ["llama-x"] })
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
beforeEach(() => {
  up.always({ content: "{}" })
  up.requests.length = 0
  up.violations.length = 0
})

const ask = (client: "chat" | "messages", model: string, schema: Record<string, unknown>, stream: boolean) =>
  client === "chat"
    ? call(`${gw.url}/v1/chat/completions`, {
        body: {
          model,
          stream,
          messages: [{ role: "user", content: "extract" }],
          response_format: { type: "json_schema", json_schema: { name: "out", schema } }
        }
      })
    : call(`${gw.url}/v1/messages`, {
        body: {
          model,
          stream,
          max_tokens: 1024,
          messages: [{ role: "user", content: "extract" }],
          output_config: { format: { type: "json_schema", schema } }
        }
      })

/** The SSE events' data, parsed. */
const events = (text: string): Array<any> =>
  text
    .split("\n")
    .filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
    .map((l) => JSON.parse(l.slice(6)))

/** The answer's text: whole or streamed, in either client format. */
const answerText = (client: "chat" | "messages", res: { body: any; text: string }, stream: boolean): string => {
  if (!stream) return client === "chat" ? res.body.choices[0].message.content : res.body.content.find((b: any) => b.type === "text").text
  return events(res.text)
    .map((e) =>
      client === "chat"
        ? (e.choices?.[0]?.delta?.content ?? "")
        : e.type === "content_block_delta" && e.delta.type === "text_delta"
          ? e.delta.text
          : ""
    )
    .join("")
}

/** The verdict event at the end of a stream. */
const verdictOf = (client: "chat" | "messages", text: string): any =>
  client === "chat" ? events(text).find((e) => e.gateway_schema)?.gateway_schema : events(text).find((e) => e.type === "gateway_schema")

/** What the upstream was sent for the schema, in its own family's terms. */
const sentSchema = (family: Family, r: Recorded): any => {
  switch (family) {
    case "openai-chat":
      return r.body.response_format
    case "openai-responses":
      return r.body.text?.format
    case "anthropic":
      return r.body.output_config?.format
    case "gemini":
      return r.body.generationConfig
    case "ollama":
      return r.body.format
  }
}

describe("the schema corpus, each family, streamed and not", () => {
  for (const { family, model, client } of TARGETS) {
    for (const stream of [false, true]) {
      it(`${family} upstream (${client} client, ${stream ? "streamed" : "whole"}): the native mechanism, accepted by its rules; answers valid`, async () => {
        for (const c of SCHEMA_CORPUS) {
          up.next({ content: JSON.stringify(c.valid), chunks: 4 })
          const res = await ask(client, model, c.schema, stream)
          expect(res.status, `${c.name}: ${res.text.slice(0, 400)}`).toBe(200)
          expect(up.violations, c.name).toEqual([])
          expect(JSON.parse(answerText(client, res, stream)), c.name).toEqual(c.valid)
          if (stream) expect(verdictOf(client, res.text), c.name).toMatchObject({ status: "valid", errors: [] })
          else expect(res.headers.get("x-gateway-schema"), c.name).toBe("valid")
          const sent = sentSchema(family, up.requests.at(-1)!)
          expect(sent, c.name).toBeDefined()
          if (family === "openai-chat") expect(sent.json_schema.strict === true, c.name).toBe(c.strictable)
          if (family === "anthropic") expect(sent.type).toBe("json_schema")
          if (family === "gemini") {
            expect(sent.responseMimeType).toBe("application/json")
            expect(sent.responseJsonSchema, c.name).toBeDefined()
          }
        }
      })
    }
  }
})

describe("an invalid answer", () => {
  const issue = SCHEMA_CORPUS[0]!
  for (const { family, model, client } of TARGETS) {
    it(`${family}: one repair attempt with the validation errors; valid then: repaired, and both calls counted`, async () => {
      up.next(
        { content: JSON.stringify(issue.invalid), usage: { input: 10, output: 5 } },
        { content: JSON.stringify(issue.valid), usage: { input: 30, output: 6 } }
      )
      const res = await ask(client, model, issue.schema, false)
      expect(res.status, res.text).toBe(200)
      expect(res.headers.get("x-gateway-schema")).toBe("repaired")
      expect(JSON.parse(answerText(client, res, false))).toEqual(issue.valid)
      expect(res.headers.get("x-gateway-tokens-in")).toBe("40")
      expect(res.headers.get("x-gateway-tokens-out")).toBe("11")
      const generate = up.requests.filter((r) => r.method === "POST")
      expect(generate).toHaveLength(2)
      // The repair request carries the invalid answer and what is wrong with it.
      const repair = JSON.stringify(generate[1]!.body)
      expect(repair).toContain("does not match the required JSON schema")
      expect(repair).toContain("/severity must be equal to one of the allowed values")
      expect(repair).toContain("urgent")
    })
  }

  it("still invalid after the repair: the first answer, marked invalid", async () => {
    up.next({ content: JSON.stringify(issue.invalid) }, { content: "not json at all" })
    const res = await ask("chat", "anth/claude-x", issue.schema, false)
    expect(res.status).toBe(200)
    expect(res.headers.get("x-gateway-schema")).toBe("invalid")
    expect(JSON.parse(answerText("chat", res, false))).toEqual(issue.invalid)
  })

  it("passed through (a chat client on a chat upstream): repaired too, the answer in the client's format", async () => {
    up.next({ content: "```json\n{}\n```" }, { content: JSON.stringify(issue.valid) })
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: {
        model: "oai/gpt-x",
        messages: [{ role: "user", content: "extract" }],
        response_format: { type: "json_schema", json_schema: { name: "out", schema: issue.schema } }
      }
    })
    expect(res.status, res.text).toBe(200)
    expect(res.headers.get("x-gateway-schema")).toBe("repaired")
    expect(res.body.object).toBe("chat.completion")
    expect(JSON.parse(res.body.choices[0].message.content)).toEqual(issue.valid)
  })

  for (const client of ["chat", "messages"] as const) {
    it(`streamed (${client} client): no repair (the text has gone), the verdict with its errors as the last event`, async () => {
      up.next({ content: JSON.stringify(issue.invalid), chunks: 3 })
      const res = await ask(client, client === "chat" ? "anth/claude-x" : "oai/gpt-x", issue.schema, true)
      expect(res.status).toBe(200)
      expect(up.requests.filter((r) => r.method === "POST")).toHaveLength(1)
      const verdict = verdictOf(client, res.text)
      expect(verdict.status).toBe("invalid")
      expect(verdict.errors.join("\n")).toContain("/severity")
      if (client === "chat") expect(res.text.trimEnd().endsWith("data: [DONE]")).toBe(true)
    })
  }
})

describe("OpenAI's strict mode", () => {
  it("optional properties are sent required and nullable; the nulls the model gives for them are taken out again", async () => {
    const contact = SCHEMA_CORPUS.find((c) => c.name.startsWith("contact"))!
    up.next({ content: JSON.stringify({ name: "Ana", phone: null, company: "Acme" }) })
    const res = await ask("messages", "oai/gpt-x", contact.schema, false)
    expect(res.status, res.text).toBe(200)
    expect(up.violations).toEqual([])
    const sent = up.requests.at(-1)!.body.response_format.json_schema
    expect(sent.strict).toBe(true)
    expect(sent.schema.required).toEqual(["name", "phone", "company"])
    expect(sent.schema.properties.phone).toEqual({ anyOf: [{ type: "string" }, { type: "null" }] })
    expect(JSON.parse(answerText("messages", res, false))).toEqual({ name: "Ana", company: "Acme" })
    expect(res.headers.get("x-gateway-schema")).toBe("valid")
  })

  it("a client that set strict itself is left as it asked (its own format, passed through)", async () => {
    const contact = SCHEMA_CORPUS.find((c) => c.name.startsWith("contact"))!
    up.next({ content: JSON.stringify(contact.valid) })
    const res = await call(`${gw.url}/v1/responses`, {
      body: {
        model: "oai/gpt-x",
        input: "extract",
        text: { format: { type: "json_schema", name: "out", schema: contact.schema, strict: false } }
      }
    })
    expect(res.status, res.text).toBe(200)
    const format = up.requests.at(-1)!.body.text.format
    expect(format.strict).toBe(false)
    expect(format.schema).toEqual(contact.schema)
    expect(res.headers.get("x-gateway-schema")).toBe("valid")
  })
})

describe("the official SDKs read the verdict event without trouble", () => {
  const schema = SCHEMA_CORPUS[0]!.schema
  it("OpenAI: a streamed chat completion ends normally", async () => {
    up.next({ content: JSON.stringify(SCHEMA_CORPUS[0]!.valid), chunks: 3 })
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0 })
    const stream = await client.chat.completions.create({
      model: "anth/claude-x",
      stream: true,
      messages: [{ role: "user", content: "extract" }],
      response_format: { type: "json_schema", json_schema: { name: "out", schema } }
    })
    let text = ""
    let verdict: unknown
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? ""
      verdict ??= (chunk as unknown as { gateway_schema?: unknown }).gateway_schema
    }
    expect(JSON.parse(text)).toEqual(SCHEMA_CORPUS[0]!.valid)
    expect(verdict).toEqual({ status: "valid", errors: [] })
  })

  it("Anthropic: a streamed message's finalMessage is the answer", async () => {
    up.next({ content: JSON.stringify(SCHEMA_CORPUS[0]!.valid), chunks: 3 })
    const client = new Anthropic({ baseURL: gw.url, apiKey: "x", maxRetries: 0 })
    const message = await client.messages
      .stream({
        model: "oai/gpt-x",
        max_tokens: 1024,
        messages: [{ role: "user", content: "extract" }],
        output_config: { format: { type: "json_schema", schema } }
      } as never)
      .finalMessage()
    const block = message.content.find((b) => b.type === "text")
    expect(block?.type === "text" && JSON.parse(block.text)).toEqual(SCHEMA_CORPUS[0]!.valid)
  })
})
