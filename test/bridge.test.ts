import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { mediaParts, withTexts } from "../src/inference/bridge/media.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeAudio, sineWav } from "./support/fakeAudio.js"
import { FakeOpenAI } from "./support/fakeOpenAI.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/** Inputs a model cannot take (docs/bridge.md): image, audio and PDF parts described by a bridge model for text-only targets. */
const ADMIN = "gwk_bridge_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

// A 1×1 PNG, and stand-ins for audio and a PDF (the fakes never decode them).
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
const PNG2 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
const WAV = Buffer.from("RIFF fake wave data").toString("base64")
const PDF = Buffer.from("%PDF-1.4 fake document").toString("base64")

let gw: TestGateway
/** A text-only model, a vision model, and the bridge model, each behind its own fake. */
let text: FakeOpenAI
let vision: FakeOpenAI
let bridge: FakeOpenAI
/** A transcription upstream (OpenAI's audio API). */
let ears: FakeAudio
let client: OpenAI

const api = (path: string, init: { method?: string; body?: unknown } = {}) => call(`${gw.url}${path}`, { ...init, headers: admin })
const imageMessage = (png = PNG): OpenAI.Chat.ChatCompletionMessageParam => ({
  role: "user",
  content: [
    { type: "text", text: "What is in this picture?" },
    { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } }
  ]
})
const setBridge = (bridge: Record<string, string | null>) => api("/api/settings", { method: "PATCH", body: { bridge } })
const combo = async (name: string, targets: ReadonlyArray<string>, bridgeModels?: Record<string, string | null>) => {
  const res = await api("/api/combos", {
    body: { name, strategy: "priority", targets: targets.map((model) => ({ model })), ...(bridgeModels ? { bridge: bridgeModels } : {}) }
  })
  expect(res.status).toBe(201)
  return res.body
}
/** What the user's last message sent upstream held, as text (its parts' texts joined). */
const sentText = (fake: FakeOpenAI, i = -1): string => {
  const req = fake.chatRequests.at(i)!
  const content = req.body.messages.at(-1).content
  return typeof content === "string" ? content : content.map((p: any) => p.text ?? `<${p.type}>`).join(" ")
}

beforeAll(async () => {
  text = await FakeOpenAI.start()
  vision = await FakeOpenAI.start()
  bridge = await FakeOpenAI.start()
  ears = await FakeAudio.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  for (const [name, fake, model, capabilities] of [
    ["plain", text, "txt", ["tools"]],
    ["seeing", vision, "seer", ["tools", "vision"]],
    ["describer", bridge, "desc", ["vision", "audio", "pdf"]]
  ] as const) {
    const add = await api("/api/providers", {
      body: { provider: "openai-compatible", name, baseUrl: fake.baseUrl, defaultModel: model, models: [model] }
    })
    expect(add.status).toBe(201)
    const caps = await api("/api/provider-models", { body: { provider: name, model, capabilities } })
    expect(caps.status).toBe(201)
  }
  const oai = await api("/api/providers", {
    body: { provider: "openai", name: "ears", apiKey: "sk-ears", baseUrl: ears.baseUrl("openai") }
  })
  expect(oai.status).toBe(201)
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: ADMIN, maxRetries: 0 })
})
afterAll(async () => {
  await gw?.close()
  await Promise.all([text?.close(), vision?.close(), bridge?.close(), ears?.close()])
})
beforeEach(async () => {
  for (const f of [text, vision, bridge]) {
    f.requests.length = 0
    f.always({ content: "ok" })
  }
  bridge.always({ content: "a red square on white" })
  await gw.resetResilience()
  await setBridge({ image: null, audio: null, pdf: null })
  for (const c of (await api("/api/combos")).body.combos) await api(`/api/combos/${c.id}`, { method: "DELETE" })
})

describe("a text-only target with a bridge model", () => {
  it("gets the image's description instead of the image, the bridge model gets the image, and the answer says so", async () => {
    await combo("ask-text", ["plain/txt"], { image: "describer/desc" })
    const { data, response } = await client.chat.completions.create({ model: "ask-text", messages: [imageMessage()] }).withResponse()
    expect(data.choices[0]!.message.content).toBe("ok")
    expect(response.headers.get("x-gateway-bridge")).toBe("image; model=describer/desc")
    // The bridge model was asked with the image itself.
    expect(bridge.chatRequests).toHaveLength(1)
    const asked = bridge.chatRequests[0]!.body.messages.at(-1).content
    expect(asked).toContainEqual({ type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } })
    // The text-only target: the description in place of the image, no image part.
    expect(text.chatRequests).toHaveLength(1)
    expect(JSON.stringify(text.chatRequests[0]!.body)).not.toContain("image_url")
    expect(sentText(text)).toBe("What is in this picture? [image: a red square on white]")
  })

  it("records the bridge call as its own usage row, linked to the request id", async () => {
    await combo("ask-text", ["plain/txt"], { image: "describer/desc" })
    const { response } = await client.chat.completions.create({ model: "ask-text", messages: [imageMessage(PNG2)] }).withResponse()
    const id = response.headers.get("x-gateway-request-id")!
    await gw.usageWritten()
    const rows = queryDb(gw.dataDir, "SELECT request_id, requested_model FROM usage WHERE request_id LIKE ? ORDER BY request_id", `${id}%`)
    expect(rows).toEqual([
      { request_id: id, requested_model: "ask-text" },
      { request_id: `${id}_bridge_1`, requested_model: "describer/desc" }
    ])
  })

  it("describes the same image once: a conversation that sends it again does not call the bridge model again", async () => {
    await combo("ask-text", ["plain/txt"], { image: "describer/desc" })
    const png = Buffer.from(`${PNG}-again`).toString("base64")
    await client.chat.completions.create({ model: "ask-text", messages: [imageMessage(png)] })
    await client.chat.completions.create({
      model: "ask-text",
      messages: [imageMessage(png), { role: "assistant", content: "ok" }, { role: "user", content: "and now?" }]
    })
    expect(bridge.chatRequests).toHaveLength(1)
    expect(text.chatRequests).toHaveLength(2)
    expect(JSON.stringify(text.chatRequests[1]!.body.messages[0])).toContain("[image: a red square on white]")
  })

  it("uses the gateway's default bridge for a model asked directly", async () => {
    await setBridge({ image: "describer/desc" })
    const png = Buffer.from(`${PNG}-direct`).toString("base64")
    const { response } = await client.chat.completions.create({ model: "plain/txt", messages: [imageMessage(png)] }).withResponse()
    expect(response.headers.get("x-gateway-bridge")).toBe("image; model=describer/desc")
    expect(sentText(text)).toContain("[image: a red square on white]")
  })

  it("fails with a 502 naming the bridge model when the bridge cannot describe, and the target is not called", async () => {
    await combo("ask-text", ["plain/txt"], { image: "describer/desc" })
    bridge.always({ status: 400, body: { error: { message: "cannot read images today", type: "invalid_request_error" } } })
    const png = Buffer.from(`${PNG}-fails`).toString("base64")
    const err = await client.chat.completions.create({ model: "ask-text", messages: [imageMessage(png)] }).catch((e) => e)
    expect(err).toBeInstanceOf(OpenAI.APIError)
    expect(err.status).toBe(502)
    expect(err.message).toContain("describer/desc")
    expect(text.chatRequests).toHaveLength(0)
  })

  it("bridges audio (input_audio) and a PDF (a file part), one bridge call each, one header value per modality", async () => {
    await combo("ask-text", ["plain/txt"], { audio: "describer/desc", pdf: "describer/desc" })
    bridge.next({ content: "hello world" }, { content: "# Report\nAll good." })
    const { response } = await client.chat.completions
      .create({
        model: "ask-text",
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "Summarise both." },
              { type: "input_audio", input_audio: { data: WAV, format: "wav" } },
              { type: "file", file: { filename: "report.pdf", file_data: `data:application/pdf;base64,${PDF}` } }
            ]
          }
        ]
      })
      .withResponse()
    expect(response.headers.get("x-gateway-bridge")).toBe("audio; model=describer/desc, pdf; model=describer/desc")
    expect(bridge.chatRequests).toHaveLength(2)
    const asked = bridge.chatRequests.map((r) => r.body.messages.at(-1).content[0].type).sort()
    expect(asked).toEqual(["file", "input_audio"])
    const sent = sentText(text)
    expect(sent).toContain("Summarise both.")
    expect(sent).toMatch(/\[audio: (hello world|# Report\nAll good\.)\]/)
    expect(sent).toMatch(/\[pdf: (hello world|# Report\nAll good\.)\]/)
    expect(JSON.stringify(text.chatRequests[0]!.body)).not.toContain(PDF)
  })

  it("sends audio to the transcription route when the bridge model is a transcription model", async () => {
    await combo("ask-text", ["plain/txt"], { audio: "ears/whisper-1" })
    ears.requests.length = 0
    const wav = sineWav(0.5).toString("base64")
    const { response } = await client.chat.completions
      .create({
        model: "ask-text",
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "What was said?" },
              { type: "input_audio", input_audio: { data: wav, format: "wav" } }
            ]
          }
        ]
      })
      .withResponse()
    expect(response.headers.get("x-gateway-bridge")).toBe("audio; model=ears/whisper-1")
    const heard = ears.requests.filter((r) => r.path === "/v1/audio/transcriptions")
    expect(heard).toHaveLength(1)
    expect(heard[0]!.form?.fields["model"]).toEqual(["whisper-1"])
    expect(heard[0]!.form?.files).toHaveLength(1)
    expect(bridge.chatRequests).toHaveLength(0)
    expect(sentText(text)).toBe("What was said? [audio: Hello from the fake. It speaks twice.]")
  })

  it("bridges a Responses request's PDF (input_file), streamed, the header on the stream", async () => {
    await combo("ask-text", ["plain/txt"], { pdf: "describer/desc" })
    bridge.always({ content: "# Minutes\nNothing decided." })
    const pdf = Buffer.from("%PDF-1.7 minutes").toString("base64")
    const res = await fetch(`${gw.url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "ask-text",
        stream: true,
        input: [
          {
            role: "user",
            content: [
              { type: "input_text", text: "Summarise:" },
              { type: "input_file", filename: "minutes.pdf", file_data: `data:application/pdf;base64,${pdf}` }
            ]
          }
        ]
      })
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-gateway-bridge")).toBe("pdf; model=describer/desc")
    expect(await res.text()).toContain("response.completed")
    expect(bridge.chatRequests[0]!.body.messages.at(-1).content[0]).toEqual({
      type: "file",
      file: { filename: "minutes.pdf", file_data: `data:application/pdf;base64,${pdf}` }
    })
    expect(sentText(text)).toContain("[pdf: # Minutes\nNothing decided.]")
    expect(JSON.stringify(text.chatRequests[0]!.body)).not.toContain(pdf)
  })

  it("bridges an Anthropic messages request's image block", async () => {
    await combo("ask-text", ["plain/txt"], { image: "describer/desc" })
    const png = Buffer.from(`${PNG}-anthropic`).toString("base64")
    const res = await call(`${gw.url}/v1/messages`, {
      headers: { "x-api-key": ADMIN, "anthropic-version": "2023-06-01" },
      body: {
        model: "ask-text",
        max_tokens: 100,
        messages: [
          {
            role: "user",
            content: [
              { type: "image", source: { type: "base64", media_type: "image/png", data: png } },
              { type: "text", text: "Describe it." }
            ]
          }
        ]
      }
    })
    expect(res.status).toBe(200)
    expect(res.body.content[0].text).toBe("ok")
    expect(res.headers.get("x-gateway-bridge")).toBe("image; model=describer/desc")
    expect(bridge.chatRequests[0]!.body.messages.at(-1).content[0]).toEqual({
      type: "image_url",
      image_url: { url: `data:image/png;base64,${png}` }
    })
    expect(sentText(text)).toContain("[image: a red square on white]")
    expect(JSON.stringify(text.chatRequests[0]!.body)).not.toContain(png)
  })
})

describe("targets that take the image natively", () => {
  it("go first: a combo [text-only, vision] sends an image to the vision target, without a bridge call", async () => {
    await combo("mixed", ["plain/txt", "seeing/seer"], { image: "describer/desc" })
    const { response } = await client.chat.completions.create({ model: "mixed", messages: [imageMessage()] }).withResponse()
    expect(vision.chatRequests).toHaveLength(1)
    expect(JSON.stringify(vision.chatRequests[0]!.body)).toContain("image_url")
    expect(text.chatRequests).toHaveLength(0)
    expect(bridge.chatRequests).toHaveLength(0)
    expect(response.headers.get("x-gateway-bridge")).toBeNull()
  })

  it("keep the combo's order for a request without media", async () => {
    await combo("mixed", ["plain/txt", "seeing/seer"], { image: "describer/desc" })
    await client.chat.completions.create({ model: "mixed", messages: [{ role: "user", content: "hi" }] })
    expect(text.chatRequests).toHaveLength(1)
    expect(vision.chatRequests).toHaveLength(0)
  })

  it("fail over to the text-only target, which then gets the bridged request", async () => {
    await combo("mixed", ["plain/txt", "seeing/seer"], { image: "describer/desc" })
    vision.always({ status: 503, body: { error: { message: "overloaded", type: "server_error" } } })
    const png = Buffer.from(`${PNG}-failover`).toString("base64")
    const { response } = await client.chat.completions.create({ model: "mixed", messages: [imageMessage(png)] }).withResponse()
    expect(vision.chatRequests).toHaveLength(1)
    expect(bridge.chatRequests).toHaveLength(1)
    expect(sentText(text)).toContain("[image: a red square on white]")
    expect(response.headers.get("x-gateway-bridge")).toBe("image; model=describer/desc")
  })
})

describe("audio and PDFs, which have no canonical form", () => {
  it("are native only where the body passes through: a PDF-capable target in another family gets the description", async () => {
    await combo("pdf-reader", ["describer/desc"], { pdf: "describer/desc" })
    bridge.always({ content: "# Invoice\nTotal: 12 EUR" })
    const pdf = Buffer.from("%PDF-1.4 invoice").toString("base64")
    // The OpenAI client's file part passes through to the OpenAI-compatible target: sent as it is.
    const same = await client.chat.completions
      .create({
        model: "pdf-reader",
        messages: [
          { role: "user", content: [{ type: "file", file: { filename: "i.pdf", file_data: `data:application/pdf;base64,${pdf}` } }] }
        ]
      })
      .withResponse()
    expect(same.response.headers.get("x-gateway-bridge")).toBeNull()
    expect(bridge.chatRequests).toHaveLength(1)
    expect(JSON.stringify(bridge.chatRequests[0]!.body)).toContain(pdf)
    // An Anthropic client's document would be lost in translation to the chat family: described instead.
    bridge.requests.length = 0
    const res = await call(`${gw.url}/v1/messages`, {
      headers: { "x-api-key": ADMIN, "anthropic-version": "2023-06-01" },
      body: {
        model: "pdf-reader",
        max_tokens: 100,
        messages: [
          {
            role: "user",
            content: [
              { type: "document", source: { type: "base64", media_type: "application/pdf", data: pdf } },
              { type: "text", text: "What is the total?" }
            ]
          }
        ]
      }
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-gateway-bridge")).toBe("pdf; model=describer/desc")
    expect(bridge.chatRequests).toHaveLength(2)
    expect(JSON.stringify(bridge.chatRequests[1]!.body)).toContain("[pdf: # Invoice\\nTotal: 12 EUR]")
  })
})

describe("bridge off", () => {
  it("leaves today's behaviour: the text-only target gets the image as sent, first in the combo's order", async () => {
    await combo("mixed", ["plain/txt", "seeing/seer"])
    const { response } = await client.chat.completions.create({ model: "mixed", messages: [imageMessage()] }).withResponse()
    expect(text.chatRequests).toHaveLength(1)
    expect(JSON.stringify(text.chatRequests[0]!.body)).toContain(`data:image/png;base64,${PNG}`)
    expect(vision.chatRequests).toHaveLength(0)
    expect(bridge.chatRequests).toHaveLength(0)
    expect(response.headers.get("x-gateway-bridge")).toBeNull()
  })

  it("a combo's bridge set to null turns the gateway's default off for it", async () => {
    await setBridge({ image: "describer/desc" })
    await combo("no-bridge", ["plain/txt"], { image: null })
    await client.chat.completions.create({ model: "no-bridge", messages: [imageMessage()] })
    expect(bridge.chatRequests).toHaveLength(0)
    expect(JSON.stringify(text.chatRequests[0]!.body)).toContain("image_url")
  })
})

describe("configuration", () => {
  it("the settings and the combos API keep the bridge models, and refuse what is not one", async () => {
    expect((await setBridge({ image: "describer/desc" })).status).toBe(200)
    expect((await api("/api/settings")).body.bridge).toEqual({ image: "describer/desc", audio: null, pdf: null })
    const bad = await setBridge({ video: "x" })
    expect(bad.status).toBe(400)
    expect(JSON.stringify(bad.body)).toContain("video")
    const made = await combo("cfg", ["plain/txt"], { pdf: "describer/desc" })
    expect(made.bridge).toEqual({ pdf: "describer/desc" })
    const patched = await api(`/api/combos/${made.id}`, { method: "PATCH", body: { bridge: null } })
    expect(patched.status).toBe(200)
    expect(patched.body.bridge).toBeNull()
    const wrong = await api("/api/combos", { body: { name: "bad", strategy: "priority", targets: [], bridge: { image: "has space" } } })
    expect(wrong.status).toBe(400)
    expect(JSON.stringify(wrong.body)).toContain("bridge.image")
  })
})

describe("capabilities", () => {
  it("the catalog says which models take audio and PDFs, and a custom model declares them", async () => {
    const catalog = (await api("/api/models/catalog")).body.models as Array<any>
    const caps = (id: string) => catalog.find((m) => m.id === id)?.capabilities
    expect(caps("gemini/gemini-2.5-flash")).toMatchObject({ vision: true, audio: true, pdf: true })
    expect(caps("anthropic/claude-sonnet-4-5")).toMatchObject({ vision: true, audio: false, pdf: true })
    expect(caps("openai/gpt-4o")).toMatchObject({ vision: true, audio: false, pdf: true })
    const custom = (await api("/api/provider-models?provider=describer")).body.models
    expect(custom).toContainEqual(expect.objectContaining({ model: "desc", capabilities: ["vision", "audio", "pdf"] }))
    const bad = await api("/api/provider-models", { body: { provider: "plain", model: "txt", capabilities: ["smell"] } })
    expect(bad.status).toBe(400)
    expect(JSON.stringify(bad.body)).toContain("pdf")
  })
})

describe("/v1/models", () => {
  it("says which input modalities each model and combo takes natively and which through a bridge", async () => {
    await setBridge({ image: "describer/desc" })
    await combo("mixed", ["plain/txt", "seeing/seer"], { pdf: "describer/desc" })
    const models = (await client.models.list()).data as Array<any>
    const byId = (id: string) => models.find((m) => m.id === id)
    expect(byId("plain/txt").modalities).toEqual({ native: ["text"], bridged: ["image"] })
    expect(byId("seeing/seer").modalities).toEqual({ native: ["text", "image"], bridged: [] })
    expect(byId("describer/desc").modalities).toEqual({ native: ["text", "image", "audio", "pdf"], bridged: [] })
    expect(byId("mixed").modalities).toEqual({ native: ["text", "image"], bridged: ["pdf"] })
  })
})

describe("media parts in each wire format", () => {
  it("Gemini: inline image, audio and PDF data and file URIs, replaced by text parts", () => {
    const body = {
      contents: [
        {
          role: "user",
          parts: [
            { text: "look" },
            { inlineData: { mimeType: "image/png", data: PNG } },
            { inlineData: { mimeType: "audio/wav", data: WAV } },
            { fileData: { mimeType: "application/pdf", fileUri: "https://files.example/doc.pdf" } },
            { inlineData: { mimeType: "text/plain", data: "aGk=" } }
          ]
        }
      ]
    }
    const parts = mediaParts("gemini", body)
    expect(parts.map((p) => [p.modality, p.source.kind, p.part])).toEqual([
      ["image", "data", 1],
      ["audio", "data", 2],
      ["pdf", "url", 3]
    ])
    const out = withTexts("gemini", body, [{ part: parts[0]!, text: "[image: a dot]" }])
    expect(out.contents).toEqual([
      { role: "user", parts: [{ text: "look" }, { text: "[image: a dot]" }, ...body.contents[0]!.parts.slice(2)] }
    ])
    // The client's body is left as it was.
    expect(body.contents[0]!.parts[1]).toEqual({ inlineData: { mimeType: "image/png", data: PNG } })
  })

  it("Ollama: the message's images leave it and their descriptions join its content", () => {
    const body = { model: "m", messages: [{ role: "user", content: "what is it?", images: [PNG] }] }
    const parts = mediaParts("ollama", body)
    expect(parts).toEqual([{ modality: "image", source: { kind: "data", mediaType: "image/png", data: PNG }, message: 0, part: 0 }])
    expect(withTexts("ollama", body, [{ part: parts[0]!, text: "[image: a dot]" }]).messages).toEqual([
      { role: "user", content: "what is it?\n[image: a dot]" }
    ])
  })

  it("Responses: input_image, input_audio and a PDF input_file; a string input or a file by id has none", () => {
    const body = {
      input: [
        {
          role: "user",
          content: [
            { type: "input_image", image_url: "https://img.example/a.png" },
            { type: "input_audio", input_audio: { data: WAV, format: "mp3" } },
            { type: "input_file", filename: "a.pdf", file_data: `data:application/pdf;base64,${PDF}` },
            { type: "input_file", file_id: "file-123" }
          ]
        }
      ]
    }
    expect(mediaParts("openai-responses", body).map((p) => [p.modality, p.source])).toEqual([
      ["image", { kind: "url", url: "https://img.example/a.png" }],
      ["audio", { kind: "data", mediaType: "audio/mpeg", data: WAV }],
      ["pdf", { kind: "data", mediaType: "application/pdf", data: PDF, filename: "a.pdf" }]
    ])
    expect(mediaParts("openai-responses", { input: "just text" })).toEqual([])
  })
})
