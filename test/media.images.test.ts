import * as Effect from "effect/Effect"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeImages, makePng } from "./support/fakeImages.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Images through the gateway (docs/media.md, "Images"), with the official `openai` SDK as the
 * client: generations and edits against an OpenAI-compatible images API, Gemini's image output
 * (generateContent) and Imagen (:predict), all answered in OpenAI's images shape; the image
 * models' list; cost headers and usage rows (per token for gpt-image when the upstream reports
 * usage, per image by quality and size otherwise); fallback across a combo; bad input.
 *
 * Prices are the catalog's: gpt-image-2 $5 in / $30 out per 1M tokens, per image at high
 * 1024x1024 $0.211; gemini-3.1-flash-image $0.067 per image; imagen-4.0-generate-001 $0.04.
 */
const ADMIN = "gwk_images_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const RED = makePng([255, 0, 0, 255])
const BLUE = makePng([0, 0, 255, 255], 2, 2)
const GREEN = makePng([0, 255, 0, 255])

let gw: TestGateway
let up: FakeImages
let flaky: FakeImages
let openai: OpenAI

const flush = () => gw.usageWritten()
const usageRow = async (requestId: string | null) => {
  await flush()
  return queryDb(
    gw.dataDir,
    "SELECT endpoint, status, provider, model, tokens_in, tokens_out, cost_usd, connection_id, fallback_attempts, requested_model, error FROM usage WHERE request_id = ?",
    requestId
  )
}
const connectionId = async (name: string): Promise<string> => (await call(`${gw.url}/api/providers/${name}`, { headers: admin })).body.id
const decoded = (b64: string | undefined) => Buffer.from(b64 ?? "", "base64")
const fromDataUrl = (url: string | undefined) => {
  const m = /^data:(image\/[a-z+]+);base64,(.*)$/.exec(url ?? "")
  return m ? { type: m[1], bytes: Buffer.from(m[2]!, "base64") } : undefined
}
/** A multipart upload through fetch (for what the SDK would not send). */
const upload = (form: FormData) =>
  fetch(`${gw.url}/v1/images/edits`, { method: "POST", body: form }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as any
  }))

beforeAll(async () => {
  up = await FakeImages.start(RED)
  flaky = await FakeImages.start(RED)
  flaky.always({ status: 503 })
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await add({ provider: "openai", name: "oai", apiKey: "sk-oai-upstream", baseUrl: `${up.url}/v1` })
  await add({
    provider: "openai-compatible",
    name: "compat",
    apiKey: "sk-compat-upstream",
    baseUrl: `${up.url}/v1`,
    models: ["flux-dev", "chat-model"]
  })
  await add({ provider: "gemini", name: "gem", apiKey: "gem-upstream-key", baseUrl: up.url })
  await add({ provider: "openai", name: "flaky", apiKey: "sk-flaky-upstream", baseUrl: `${flaky.url}/v1` })
  await add({ provider: "anthropic", name: "claude", apiKey: "sk-ant-upstream", baseUrl: up.url })
  const combo = await call(`${gw.url}/api/combos`, {
    body: { name: "pictures", strategy: "priority", targets: [{ model: "flaky/gpt-image-2" }, { model: "gem/gemini-3.1-flash-image" }] },
    headers: admin
  })
  expect(combo.status, JSON.stringify(combo.body)).toBe(201)
  openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "unused", maxRetries: 0 })
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
  await flaky?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  up.png = RED
  up.always({})
  up.requests.length = 0
  flaky.requests.length = 0
})

describe("POST /v1/images/generations, OpenAI-compatible upstream", () => {
  it("images.generate (b64_json): the PNG arrives byte for byte; cost headers and the usage row are priced per token", async () => {
    const { data, response } = await openai.images
      .generate({ model: "oai/gpt-image-2", prompt: "a red pixel", size: "1024x1024", quality: "high", response_format: "b64_json" })
      .withResponse()
    expect(data.data).toHaveLength(1)
    expect(decoded(data.data![0]!.b64_json).equals(RED)).toBe(true)
    expect(data).toMatchObject({
      output_format: "png",
      quality: "high",
      size: "1024x1024",
      usage: { input_tokens: 50, output_tokens: 1056 }
    })
    // Upstream: the model as it knows it, the fields as sent, no response_format (a GPT image model refuses it).
    const sent = up.requests.at(-1)!
    expect(sent.path).toBe("/v1/images/generations")
    expect(sent.headers["authorization"]).toBe("Bearer sk-oai-upstream")
    expect(sent.json).toEqual({ model: "gpt-image-2", prompt: "a red pixel", size: "1024x1024", quality: "high" })
    // 50 × $5/1M + 1056 × $30/1M: the image is in the output tokens, not charged again per image.
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0319300000")
    expect(response.headers.get("x-gateway-tokens-in")).toBe("50")
    expect(response.headers.get("x-gateway-tokens-out")).toBe("1056")
    expect(response.headers.get("x-gateway-model")).toBe("gpt-image-2")
    expect(response.headers.get("x-gateway-provider")).toBe("openai")
    const [row] = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({
      endpoint: "images.generations",
      status: 200,
      provider: "openai",
      model: "gpt-image-2",
      tokens_in: 50,
      tokens_out: 1056,
      requested_model: "oai/gpt-image-2",
      error: null
    })
    expect(row!["cost_usd"]).toBeCloseTo(0.03193, 12)
  })

  it("images.generate (url) from an upstream that answers bytes: a data: URL of the same PNG", async () => {
    const res = await openai.images.generate({ model: "oai/gpt-image-2", prompt: "a red pixel", response_format: "url" })
    const url = fromDataUrl(res.data![0]!.url)
    expect(url?.type).toBe("image/png")
    expect(url?.bytes.equals(RED)).toBe(true)
    expect(res.data![0]!.b64_json).toBeUndefined()
  })

  it("without usage from the upstream, images are priced per image by quality and size; a perImage override wins over the table", async () => {
    up.always({ noUsage: true })
    const { data, response } = await openai.images
      .generate({ model: "oai/gpt-image-2", prompt: "two pixels", n: 2, size: "1024x1024", quality: "high" })
      .withResponse()
    expect(data.data).toHaveLength(2)
    expect(up.requests.at(-1)!.json).toMatchObject({ n: 2 })
    // 2 × $0.211 (high:1024x1024)
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.4220000000")
    expect(response.headers.get("x-gateway-tokens-in")).toBe("0")
    const [row] = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row!["cost_usd"]).toBeCloseTo(0.422, 12)
    // Medium 1536x1024: $0.041 each.
    const medium = await openai.images
      .generate({ model: "oai/gpt-image-2", prompt: "wide", size: "1536x1024", quality: "medium" })
      .withResponse()
    expect(medium.response.headers.get("x-gateway-response-cost")).toBe("0.0410000000")

    const set = await call(`${gw.url}/api/pricing`, {
      method: "PUT",
      body: { provider: "openai", model: "gpt-image-2", perImage: 0.1 },
      headers: admin
    })
    expect(set.status, set.text).toBe(200)
    try {
      const priced = await openai.images
        .generate({ model: "oai/gpt-image-2", prompt: "two pixels", n: 2, size: "1024x1024", quality: "high" })
        .withResponse()
      expect(priced.response.headers.get("x-gateway-response-cost")).toBe("0.2000000000")
    } finally {
      await call(`${gw.url}/api/pricing`, { method: "DELETE", body: { provider: "openai", model: "gpt-image-2" }, headers: admin })
    }
  })

  it("an unpriced model of an OpenAI-compatible server costs 0.0000000000; its response_format is forwarded and a url answer relayed", async () => {
    up.always({ noUsage: true })
    const { data, response } = await openai.images
      .generate({ model: "compat/flux-dev", prompt: "a fox", response_format: "url" })
      .withResponse()
    expect(up.requests.at(-1)!.json).toEqual({ model: "flux-dev", prompt: "a fox", response_format: "url" })
    expect(data.data![0]!.url).toBe(`${up.url}/files/image.png`)
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0000000000")
    expect(response.headers.get("x-gateway-provider")).toBe("openai-compatible")
  })

  it("POST /v1/providers/{provider}/images/generations pins the model to that provider", async () => {
    const res = await call(`${gw.url}/v1/providers/oai/images/generations`, { body: { model: "gpt-image-2", prompt: "pinned" } })
    expect(res.status, res.text).toBe(200)
    expect(decoded(res.body.data[0].b64_json).equals(RED)).toBe(true)
    expect(up.requests.at(-1)!.json.model).toBe("gpt-image-2")
    expect(res.headers.get("x-gateway-provider")).toBe("openai")
    const mismatch = await call(`${gw.url}/v1/providers/oai/images/generations`, {
      body: { model: "gem/gemini-3.1-flash-image", prompt: "x" }
    })
    expect(mismatch.status).toBe(400)
    expect(mismatch.body.error.code).toBe("model_provider_mismatch")
  })
})

describe("POST /v1/images/generations, Gemini upstreams", () => {
  it("images.generate against generateContent image output: n images from n calls, size as imageConfig, inlineData as b64_json, priced per image", async () => {
    const { data, response } = await openai.images
      .generate({
        model: "gem/gemini-3.1-flash-image",
        prompt: "a banana in a tuxedo",
        n: 2,
        size: "1536x1024",
        response_format: "b64_json"
      })
      .withResponse()
    expect(data.data).toHaveLength(2)
    for (const d of data.data!) expect(decoded(d.b64_json).equals(RED)).toBe(true)
    expect(data).toMatchObject({ output_format: "png", size: "1536x1024", usage: { input_tokens: 24, output_tokens: 2580 } })
    const calls = up.requests.filter((r) => r.path === "/v1beta/models/gemini-3.1-flash-image:generateContent")
    expect(calls).toHaveLength(2)
    for (const c of calls) {
      expect(c.headers["x-goog-api-key"]).toBe("gem-upstream-key")
      expect(c.json).toEqual({
        contents: [{ role: "user", parts: [{ text: "a banana in a tuxedo" }] }],
        generationConfig: { responseModalities: ["TEXT", "IMAGE"], imageConfig: { aspectRatio: "3:2" } }
      })
    }
    // 2 × $0.067: the image model has no output token price.
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.1340000000")
    expect(response.headers.get("x-gateway-tokens-in")).toBe("24")
    expect(response.headers.get("x-gateway-tokens-out")).toBe("2580")
    expect(response.headers.get("x-gateway-provider")).toBe("gemini")
    expect(response.headers.get("x-gateway-model")).toBe("gemini-3.1-flash-image")
    const [row] = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({
      endpoint: "images.generations",
      status: 200,
      provider: "gemini",
      model: "gemini-3.1-flash-image",
      tokens_in: 24,
      tokens_out: 2580
    })
    expect(row!["cost_usd"]).toBeCloseTo(0.134, 12)
  })

  it("images.generate (url) against Gemini: a data: URL", async () => {
    const res = await openai.images.generate({ model: "gem/gemini-3.1-flash-image", prompt: "a pixel", response_format: "url" })
    const url = fromDataUrl(res.data![0]!.url)
    expect(url?.bytes.equals(RED)).toBe(true)
  })

  it("a refusal (finishReason IMAGE_SAFETY, no image) is a 400 moderation_blocked, not a 5xx", async () => {
    up.always({ finishReason: "IMAGE_SAFETY" })
    const res = await call(`${gw.url}/v1/images/generations`, {
      body: { model: "gem/gemini-3.1-flash-image", prompt: "something refused" }
    })
    expect(res.status).toBe(400)
    expect(res.body.error).toMatchObject({ code: "moderation_blocked", param: "prompt" })
    expect(res.body.error.message).toContain("IMAGE_SAFETY")
  })

  it("images.generate against Imagen :predict: instances and parameters out, predictions' bytes back as b64_json", async () => {
    const { data, response } = await openai.images
      .generate({ model: "gem/imagen-4.0-generate-001", prompt: "robot with a red skateboard", n: 2, size: "1792x1024" })
      .withResponse()
    expect(data.data).toHaveLength(2)
    for (const d of data.data!) expect(decoded(d.b64_json).equals(RED)).toBe(true)
    const sent = up.requests.at(-1)!
    expect(sent.path).toBe("/v1beta/models/imagen-4.0-generate-001:predict")
    expect(sent.headers["x-goog-api-key"]).toBe("gem-upstream-key")
    expect(sent.json).toEqual({
      instances: [{ prompt: "robot with a red skateboard" }],
      parameters: { sampleCount: 2, aspectRatio: "16:9", imageSize: "2K" }
    })
    // 2 × $0.04
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0800000000")
    expect(response.headers.get("x-gateway-tokens-in")).toBe("0")
  })
})

describe("POST /v1/images/edits", () => {
  it("images.edit with one image: the multipart upload reaches an OpenAI-compatible upstream with the image bytes, prompt and model", async () => {
    const { data, response } = await openai.images
      .edit({ model: "oai/gpt-image-2", image: await toFile(GREEN, "green.png", { type: "image/png" }), prompt: "make it red" })
      .withResponse()
    expect(decoded(data.data![0]!.b64_json).equals(RED)).toBe(true)
    const sent = up.requests.at(-1)!
    expect(sent.path).toBe("/v1/images/edits")
    expect(sent.headers["authorization"]).toBe("Bearer sk-oai-upstream")
    expect(sent.form!.fields).toEqual({ model: ["gpt-image-2"], prompt: ["make it red"] })
    expect(sent.form!.files).toHaveLength(1)
    expect(sent.form!.files[0]).toMatchObject({ field: "image", filename: "green.png", type: "image/png" })
    expect(sent.form!.files[0]!.bytes.equals(GREEN)).toBe(true)
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0319300000")
    const [row] = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ endpoint: "images.edits", status: 200, provider: "openai", model: "gpt-image-2" })
  })

  it("images.edit with two images and a mask: image[] twice and the mask arrive with their bytes, and the other fields", async () => {
    const res = await openai.images.edit({
      model: "oai/gpt-image-2",
      image: [await toFile(GREEN, "a.png", { type: "image/png" }), await toFile(BLUE, "b.png", { type: "image/png" })],
      mask: await toFile(RED, "mask.png", { type: "image/png" }),
      prompt: "put both in a gift box",
      n: 2,
      quality: "low",
      size: "1024x1536",
      background: "opaque",
      output_format: "png"
    })
    expect(res.data).toHaveLength(2)
    const sent = up.requests.at(-1)!
    const files = sent.form!.files
    expect(files.map((f) => [f.field, f.filename])).toEqual([
      ["image[]", "a.png"],
      ["image[]", "b.png"],
      ["mask", "mask.png"]
    ])
    expect(files[0]!.bytes.equals(GREEN)).toBe(true)
    expect(files[1]!.bytes.equals(BLUE)).toBe(true)
    expect(files[2]!.bytes.equals(RED)).toBe(true)
    expect(sent.form!.fields).toEqual({
      model: ["gpt-image-2"],
      prompt: ["put both in a gift box"],
      n: ["2"],
      quality: ["low"],
      size: ["1024x1536"],
      background: ["opaque"],
      output_format: ["png"]
    })
  })

  it("images.edit against Gemini: the images go as inlineData parts of generateContent", async () => {
    const res = await openai.images.edit({
      model: "gem/gemini-3.1-flash-image",
      image: await toFile(GREEN, "green.png", { type: "image/png" }),
      prompt: "paint it red"
    })
    expect(decoded(res.data![0]!.b64_json).equals(RED)).toBe(true)
    const sent = up.requests.at(-1)!
    expect(sent.path).toBe("/v1beta/models/gemini-3.1-flash-image:generateContent")
    expect(sent.json.contents[0].parts).toEqual([
      { text: "paint it red" },
      { inlineData: { mimeType: "image/png", data: GREEN.toString("base64") } }
    ])
  })

  it("a JSON edit with images[].image_url data URLs is sent upstream as multipart", async () => {
    const res = await call(`${gw.url}/v1/images/edits`, {
      body: {
        model: "oai/gpt-image-2",
        prompt: "json edit",
        images: [{ image_url: `data:image/png;base64,${BLUE.toString("base64")}` }],
        mask: { image_url: `data:image/png;base64,${RED.toString("base64")}` }
      }
    })
    expect(res.status, res.text).toBe(200)
    const sent = up.requests.at(-1)!
    expect(sent.form!.files.map((f) => f.field)).toEqual(["image", "mask"])
    expect(sent.form!.files[0]!.bytes.equals(BLUE)).toBe(true)
    expect(sent.form!.fields["prompt"]).toEqual(["json edit"])
  })
})

describe("GET /v1/images/generations", () => {
  it("lists the image models of the connections in OpenAI's list shape, with their kind", async () => {
    const res = await call(`${gw.url}/v1/images/generations`)
    expect(res.status).toBe(200)
    expect(res.body.object).toBe("list")
    const ids = res.body.data.map((m: any) => m.id)
    for (const id of [
      "oai/gpt-image-2",
      "oai/gpt-image-2.5-flare",
      "gem/gemini-3.1-flash-image",
      "gem/gemini-3-pro-image",
      "gem/imagen-4.0-generate-001",
      "compat/flux-dev"
    ]) {
      expect(ids).toContain(id)
    }
    for (const id of ["oai/gpt-4o", "gem/gemini-2.5-pro", "compat/chat-model", "oai/text-embedding-3-small"]) expect(ids).not.toContain(id)
    expect(res.body.data.find((m: any) => m.id === "gem/gemini-3.1-flash-image")).toMatchObject({
      object: "model",
      owned_by: "gemini",
      kind: "image"
    })
    expect(ids.some((id: string) => id.startsWith("claude/"))).toBe(false)
  })
})

describe("fallback", () => {
  it("a combo of two image models whose first answers 503 answers from the second", async () => {
    const { data, response } = await openai.images.generate({ model: "pictures", prompt: "fallback please" }).withResponse()
    expect(decoded(data.data![0]!.b64_json).equals(RED)).toBe(true)
    expect(flaky.hits(/^\/v1\/images\/generations$/)).toBe(1)
    expect(up.hits(/gemini-3\.1-flash-image:generateContent$/)).toBe(1)
    expect(response.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(response.headers.get("x-gateway-provider")).toBe("gemini")
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0670000000")
    const [row] = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ status: 200, connection_id: await connectionId("gem"), fallback_attempts: 1, requested_model: "pictures" })
  })
})

describe("bad input is a 4xx naming the problem", () => {
  const generate = (body: Record<string, unknown>) => call(`${gw.url}/v1/images/generations`, { body })

  it("generations: missing prompt, n: 0, a bad size, stream, no model, a chat-only provider's model", async () => {
    const noPrompt = await generate({ model: "oai/gpt-image-2" })
    expect(noPrompt.status).toBe(400)
    expect(noPrompt.body.error.param).toBe("prompt")
    expect(noPrompt.body.error.message).toContain("prompt")
    const zero = await generate({ model: "oai/gpt-image-2", prompt: "x", n: 0 })
    expect(zero.status).toBe(400)
    expect(zero.body.error).toMatchObject({ param: "n", message: expect.stringContaining("between 1 and 10") })
    const size = await generate({ model: "oai/gpt-image-2", prompt: "x", size: "huge" })
    expect(size.status).toBe(400)
    expect(size.body.error.param).toBe("size")
    const stream = await generate({ model: "oai/gpt-image-2", prompt: "x", stream: true })
    expect(stream.status).toBe(400)
    expect(stream.body.error.param).toBe("stream")
    const format = await generate({ model: "oai/gpt-image-2", prompt: "x", response_format: "gif" })
    expect(format.status).toBe(400)
    expect(format.body.error.param).toBe("response_format")
    const noModel = await generate({ prompt: "x" })
    expect(noModel.status).toBe(400)
    expect(noModel.body.error.param).toBe("model")
    const chat = await generate({ model: "claude/claude-sonnet-4-5", prompt: "x" })
    expect(chat.status).toBe(400)
    expect(chat.body.error).toMatchObject({ code: "model_not_supported", param: "model" })
    expect(chat.body.error.message).toContain("image generation")
    expect(up.hits(/images/)).toBe(0)
  })

  it("edits: not multipart, JSON without images, no image, a file that is not an image, a remote image_url, n: 0", async () => {
    const text = await call(`${gw.url}/v1/images/edits`, { body: "prompt=x", headers: { "content-type": "text/plain" } })
    expect(text.status).toBe(415)
    expect(text.body.error.message).toContain("multipart/form-data")
    const json = await call(`${gw.url}/v1/images/edits`, { body: { model: "oai/gpt-image-2", prompt: "x" } })
    expect(json.status).toBe(400)
    expect(json.body.error.param).toBe("images")
    const remote = await call(`${gw.url}/v1/images/edits`, {
      body: { model: "oai/gpt-image-2", prompt: "x", images: [{ image_url: "https://example.com/a.png" }] }
    })
    expect(remote.status).toBe(400)
    expect(remote.body.error.param).toBe("images[0].image_url")

    const noImage = new FormData()
    noImage.set("model", "oai/gpt-image-2")
    noImage.set("prompt", "x")
    const missing = await upload(noImage)
    expect(missing.status).toBe(400)
    expect(missing.body.error.param).toBe("image")

    const notImage = new FormData()
    notImage.set("model", "oai/gpt-image-2")
    notImage.set("prompt", "x")
    notImage.set("image", new Blob(["just some text"], { type: "image/png" }), "fake.png")
    const bad = await upload(notImage)
    expect(bad.status).toBe(400)
    expect(bad.body.error).toMatchObject({ param: "image", code: "invalid_image" })

    const zero = new FormData()
    zero.set("model", "oai/gpt-image-2")
    zero.set("prompt", "x")
    zero.set("n", "0")
    zero.set("image", new Blob([GREEN], { type: "image/png" }), "g.png")
    const n = await upload(zero)
    expect(n.status).toBe(400)
    expect(n.body.error.param).toBe("n")
    expect(up.hits(/images/)).toBe(0)
  })

  it("edits: an image over the size limit is a 413 naming the field", async () => {
    const form = new FormData()
    form.set("model", "oai/gpt-image-2")
    form.set("prompt", "x")
    form.set("image", new Blob([Buffer.concat([GREEN, Buffer.alloc(25 * 1024 * 1024)])], { type: "image/png" }), "huge.png")
    const res = await upload(form)
    expect(res.status).toBe(413)
    expect(res.body.error).toMatchObject({ code: "file_too_large", param: "image" })
    expect(res.body.error.message).toContain("larger than")
    expect(up.hits(/images/)).toBe(0)
  })
})
