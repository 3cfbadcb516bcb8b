import * as Effect from "effect/Effect"
import { parseBuffer } from "music-metadata"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeAudio, sineMp3, sinePcm, sineWav } from "./support/fakeAudio.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * The audio endpoints (docs/media.md, "Audio"): speech relayed as it arrives from
 * OpenAI-compatible, ElevenLabs and Deepgram upstreams, Gemini's PCM wrapped or encoded; speech to
 * text from OpenAI-compatible, Deepgram, ElevenLabs and Gemini upstreams with the duration measured
 * from the upload itself; all through the guarded attempt, with cost headers and one usage row.
 * The clients are the official OpenAI SDK (and fetch where the SDK cannot show a failure).
 */
const ADMIN = "gwk_audio_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeAudio
let down: FakeAudio
let client: OpenAI

const usageRow = async (requestId: string | null) => {
  await gw.usageWritten()
  const rows = queryDb(
    gw.dataDir,
    "SELECT endpoint, status, provider, model, stream, tokens_in, tokens_out, cost_usd, fallback_attempts, error FROM usage WHERE request_id = ?",
    requestId
  )
  expect(rows).toHaveLength(1)
  return rows[0]!
}

const seen = (family: string, path?: RegExp) => up.requests.filter((r) => r.family === family && (!path || path.test(r.path)))
const last = (family: string) => seen(family).at(-1)!

/** Costs as the headers carry them. */
const fixed = (usd: number) => usd.toFixed(10)

const wav15 = sineWav(1.5)

const upload = (bytes: Buffer, name = "speech.wav", type = "audio/wav") => toFile(bytes, name, { type })

/** A multipart request by hand (fetch's FormData), for what the SDK will not send. */
const postForm = async (path: string, parts: Record<string, string | Blob>, filename = "speech.wav") => {
  const form = new FormData()
  for (const [k, v] of Object.entries(parts)) typeof v === "string" ? form.append(k, v) : form.append(k, v, filename)
  const res = await fetch(`${gw.url}${path}`, { method: "POST", body: form, headers: admin })
  const text = await res.text()
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: res.status, headers: res.headers, text, body }
}

beforeAll(async () => {
  up = await FakeAudio.start()
  down = await FakeAudio.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await add({ provider: "openai", name: "oai", apiKey: "sk-oai-upstream", baseUrl: up.baseUrl("openai") })
  await add({ provider: "groq", name: "groq", apiKey: "gsk-upstream", baseUrl: up.baseUrl("openai") })
  await add({ provider: "elevenlabs", name: "el", apiKey: "xi-upstream-key", baseUrl: up.baseUrl("elevenlabs") })
  await add({ provider: "deepgram", name: "dg", apiKey: "dg-upstream-key", baseUrl: up.baseUrl("deepgram") })
  await add({ provider: "gemini", name: "gem", apiKey: "gemini-upstream-key", baseUrl: up.baseUrl("gemini") })
  // Two connections serving the same models: "pair-a" (tried first) on `down`, "pair-b" on `up`.
  await add({
    provider: "openai-compatible",
    name: "pair-a",
    apiKey: "sk-pair-a",
    priority: 1,
    baseUrl: down.baseUrl("openai"),
    models: ["voice-1", "ears-1"]
  })
  await add({
    provider: "openai-compatible",
    name: "pair-b",
    apiKey: "sk-pair-b",
    priority: 2,
    baseUrl: up.baseUrl("openai"),
    models: ["voice-1", "ears-1"]
  })
  const combo = await call(`${gw.url}/api/combos`, {
    body: { name: "speakers", strategy: "priority", targets: [{ model: "gem/gemini-2.5-flash-preview-tts" }, { model: "oai/tts-1" }] },
    headers: admin
  })
  expect(combo.status, JSON.stringify(combo.body)).toBe(201)
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: ADMIN, maxRetries: 0 })
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
  await down?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  up.reset()
  down.reset()
})

describe("POST /v1/audio/speech", () => {
  it("relays an OpenAI-compatible upstream's audio as it arrives: the exact bytes, audio/mpeg, cost per character in the headers and the usage row", async () => {
    const audio = sineMp3(1)
    let release!: () => void
    const held = new Promise<void>((r) => (release = r))
    const safety = setTimeout(release, 5000)
    up.next({ audio, chunks: 4, holdAfterFirst: held })

    const { data, response } = await client.audio.speech
      .create({ model: "oai/tts-1", input: "Hello world", voice: "alloy", speed: 1.25 })
      .withResponse()
    expect(response.headers.get("content-type")).toBe("audio/mpeg")
    const reader = data.body!.getReader()
    const first = await reader.read()
    // The first piece reached the client while the upstream still held the rest back.
    let releasedBefore = true
    held.then(() => (releasedBefore = false))
    await Promise.resolve()
    expect(releasedBefore).toBe(true)
    expect(first.value!.length).toBeGreaterThan(0)
    release()
    clearTimeout(safety)
    const pieces = [Buffer.from(first.value!)]
    for (let r = await reader.read(); !r.done; r = await reader.read()) pieces.push(Buffer.from(r.value))
    expect(Buffer.concat(pieces).equals(audio)).toBe(true)

    expect(last("openai").json).toEqual({ model: "tts-1", input: "Hello world", voice: "alloy", response_format: "mp3", speed: 1.25 })
    expect(last("openai").headers.authorization).toBe("Bearer sk-oai-upstream")
    // 11 characters at $15 per 1M.
    expect(response.headers.get("x-gateway-response-cost")).toBe(fixed(11 * 15e-6))
    expect(response.headers.get("x-gateway-tokens-in")).toBe("0")
    expect(response.headers.get("x-gateway-tokens-out")).toBe("0")
    expect(response.headers.get("x-gateway-model")).toBe("tts-1")
    expect(response.headers.get("x-gateway-provider")).toBe("openai")
    const row = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ endpoint: "audio.speech", status: 200, provider: "openai", model: "tts-1", stream: 1 })
    expect(row.cost_usd).toBeCloseTo(11 * 15e-6, 12)
  })

  it("ElevenLabs: an OpenAI voice name maps to a premade voice, opus to output_format opus_48000_64, the key goes as xi-api-key", async () => {
    const audio = Buffer.from("OggS fake opus pages ".repeat(50))
    up.next({ audio })
    const { data, response } = await client.audio.speech
      .create({ model: "el/eleven_flash_v2_5", input: "Bonjour", voice: "alloy", response_format: "opus", speed: 2 })
      .withResponse()
    expect(Buffer.from(await data.arrayBuffer()).equals(audio)).toBe(true)
    expect(response.headers.get("content-type")).toBe("audio/ogg")
    const got = last("elevenlabs")
    expect(got.path).toBe("/v1/text-to-speech/SAz9YHcvj6GT2YYXdXww/stream")
    expect(got.query.get("output_format")).toBe("opus_48000_64")
    expect(got.headers["xi-api-key"]).toBe("xi-upstream-key")
    // ElevenLabs takes speeds 0.7 to 1.2.
    expect(got.json).toEqual({ text: "Bonjour", model_id: "eleven_flash_v2_5", voice_settings: { speed: 1.2 } })
    expect(response.headers.get("x-gateway-response-cost")).toBe(fixed(7 * 0.00005))
  })

  it("ElevenLabs: wav is its 24 kHz PCM wrapped by the gateway; another voice id passes through", async () => {
    const pcm = sinePcm(0.25)
    up.next({ audio: pcm })
    const { data, response } = await client.audio.speech
      .create({ model: "el/eleven_multilingual_v2", input: "Hi", voice: "JBFqnCBsd6RMkjVDRZzb", response_format: "wav" })
      .withResponse()
    const wav = Buffer.from(await data.arrayBuffer())
    expect(response.headers.get("content-type")).toBe("audio/wav")
    expect(last("elevenlabs").path).toBe("/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb")
    expect(last("elevenlabs").query.get("output_format")).toBe("pcm_24000")
    expect(wav.toString("ascii", 0, 4)).toBe("RIFF")
    expect(wav.subarray(44).equals(pcm)).toBe(true)
    expect((await parseBuffer(wav)).format.duration).toBeCloseTo(0.25, 3)
  })

  it("ElevenLabs alone refuses aac with a 400 naming the formats it offers", async () => {
    const res = await call(`${gw.url}/v1/audio/speech`, {
      body: { model: "el/eleven_flash_v2_5", input: "Hi", voice: "alloy", response_format: "aac" },
      headers: admin
    })
    expect(res.status).toBe(400)
    expect(res.body.error.param).toBe("response_format")
    expect(res.body.error.message).toMatch(/offers mp3, opus, wav and pcm; aac would need an encoder/)
    expect(seen("elevenlabs")).toHaveLength(0)
  })

  it("Deepgram: the model is the voice, flac asks encoding=flac, the key goes as Token", async () => {
    const audio = Buffer.from("fLaC fake flac frames ".repeat(40))
    up.next({ audio })
    const { data, response } = await client.audio.speech
      .create({ model: "dg/aura-2-thalia-en", input: "Good morning", voice: "alloy", response_format: "flac" })
      .withResponse()
    expect(Buffer.from(await data.arrayBuffer()).equals(audio)).toBe(true)
    expect(response.headers.get("content-type")).toBe("audio/flac")
    const got = last("deepgram")
    expect(got.path).toBe("/v1/speak")
    expect(Object.fromEntries(got.query)).toEqual({ model: "aura-2-thalia-en", encoding: "flac" })
    expect(got.headers.authorization).toBe("Token dg-upstream-key")
    expect(got.json).toEqual({ text: "Good morning" })
    expect(response.headers.get("x-gateway-response-cost")).toBe(fixed(12 * 0.00003))
  })

  it("Gemini TTS: the PCM comes back as a WAV with a valid RIFF header and every sample, priced by the tokens Gemini reports", async () => {
    const pcm = sinePcm(1.5)
    up.next({ pcm, geminiUsage: { prompt: 10, candidates: 1000 } })
    const { data, response } = await client.audio.speech
      .create({
        model: "gem/gemini-2.5-flash-preview-tts",
        input: "Have a wonderful day",
        voice: "alloy",
        response_format: "wav",
        instructions: "Say cheerfully"
      })
      .withResponse()
    const wav = Buffer.from(await data.arrayBuffer())
    expect(response.headers.get("content-type")).toBe("audio/wav")
    expect(wav.toString("ascii", 0, 4)).toBe("RIFF")
    expect(wav.readUInt32LE(4)).toBe(wav.length - 8)
    expect(wav.toString("ascii", 8, 16)).toBe("WAVEfmt ")
    expect(wav.readUInt16LE(20)).toBe(1)
    expect(wav.readUInt16LE(22)).toBe(1)
    expect(wav.readUInt32LE(24)).toBe(24_000)
    expect(wav.toString("ascii", 36, 40)).toBe("data")
    expect(wav.readUInt32LE(40) / 2).toBe(36_000)
    expect(wav.subarray(44).equals(pcm)).toBe(true)
    const meta = await parseBuffer(wav)
    expect(meta.format.numberOfSamples).toBe(36_000)
    expect(meta.format.duration).toBeCloseTo(1.5, 6)

    const got = last("gemini")
    expect(got.path).toBe("/v1beta/models/gemini-2.5-flash-preview-tts:generateContent")
    expect(got.headers["x-goog-api-key"]).toBe("gemini-upstream-key")
    expect(got.json.generationConfig).toEqual({
      responseModalities: ["AUDIO"],
      speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: "Kore" } } }
    })
    expect(got.json.contents[0].parts[0].text).toBe("Say cheerfully: Have a wonderful day")
    // Tokens: 10 in at $0.50, 1000 out at $10 per 1M; the characters are not charged as well.
    expect(response.headers.get("x-gateway-response-cost")).toBe(fixed((10 * 0.5 + 1000 * 10) / 1e6))
    expect(response.headers.get("x-gateway-tokens-in")).toBe("10")
    expect(response.headers.get("x-gateway-tokens-out")).toBe("1000")
    const row = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ endpoint: "audio.speech", status: 200, provider: "gemini", tokens_in: 10, tokens_out: 1000 })
    expect(row.cost_usd).toBeCloseTo((10 * 0.5 + 1000 * 10) / 1e6, 12)
  })

  it("Gemini TTS: mp3 (the default) is encoded by the gateway and plays for about the PCM's duration; pcm is the raw samples", async () => {
    const pcm = sinePcm(1.5)
    up.always({ pcm })
    const { data, response } = await client.audio.speech
      .create({ model: "gem/gemini-2.5-flash-preview-tts", input: "One two three", voice: "Puck" })
      .withResponse()
    const mp3 = Buffer.from(await data.arrayBuffer())
    expect(response.headers.get("content-type")).toBe("audio/mpeg")
    const meta = await parseBuffer(mp3, { mimeType: "audio/mpeg" }, { duration: true })
    expect(meta.format.container).toBe("MPEG")
    expect(meta.format.sampleRate).toBe(24_000)
    expect(meta.format.duration).toBeGreaterThan(1.45)
    expect(meta.format.duration).toBeLessThan(1.65)
    expect(last("gemini").json.generationConfig.speechConfig.voiceConfig.prebuiltVoiceConfig.voiceName).toBe("Puck")

    const raw = await client.audio.speech
      .create({ model: "gem/gemini-2.5-flash-preview-tts", input: "One two three", voice: "alloy", response_format: "pcm" })
      .withResponse()
    expect(raw.response.headers.get("content-type")).toBe("audio/pcm")
    expect(Buffer.from(await raw.data.arrayBuffer()).equals(pcm)).toBe(true)
  })

  it("Gemini TTS alone refuses opus (it needs an encoder) with a 400 naming mp3, wav and pcm; in a combo the next target answers", async () => {
    const alone = await call(`${gw.url}/v1/audio/speech`, {
      body: { model: "gem/gemini-2.5-flash-preview-tts", input: "Hi", voice: "alloy", response_format: "opus" },
      headers: admin
    })
    expect(alone.status).toBe(400)
    expect(alone.body.error).toMatchObject({ param: "response_format", code: "unsupported_value" })
    expect(alone.body.error.message).toMatch(/gives as mp3, wav or pcm; opus would need an encoder the gateway does not ship/)
    expect(seen("gemini")).toHaveLength(0)

    const audio = Buffer.from("OggS from openai ".repeat(20))
    up.next({ audio })
    const { data, response } = await client.audio.speech
      .create({ model: "speakers", input: "Hi", voice: "alloy", response_format: "opus" })
      .withResponse()
    expect(Buffer.from(await data.arrayBuffer()).equals(audio)).toBe(true)
    expect(response.headers.get("x-gateway-provider")).toBe("openai")
    expect(seen("gemini")).toHaveLength(0)
  })

  it("falls back to the second connection when the first answers 503, with one usage row after one fallback", async () => {
    down.always({ status: 503 })
    const audio = sineMp3(0.3)
    up.next({ audio })
    const { data, response } = await client.audio.speech.create({ model: "voice-1", input: "Fallback", voice: "echo" }).withResponse()
    expect(Buffer.from(await data.arrayBuffer()).equals(audio)).toBe(true)
    expect(response.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(down.requests.filter((r) => r.path === "/v1/audio/speech")).toHaveLength(1)
    expect(seen("openai", /speech/)).toHaveLength(1)
    // openai-compatible models are unpriced: the header still says so, with 10 decimals.
    expect(response.headers.get("x-gateway-response-cost")).toBe("0.0000000000")
    expect(await usageRow(response.headers.get("x-gateway-request-id"))).toMatchObject({
      endpoint: "audio.speech",
      status: 200,
      model: "voice-1",
      fallback_attempts: 1
    })
  })

  it("an upstream that breaks off mid-audio cuts the client's transfer instead of ending a shorter file", async () => {
    up.next({ audio: sineMp3(1), chunks: 4, cutAfterFirst: true })
    const res = await fetch(`${gw.url}/v1/audio/speech`, {
      method: "POST",
      headers: { ...admin, "content-type": "application/json" },
      body: JSON.stringify({ model: "oai/tts-1", input: "Broken", voice: "alloy" })
    })
    expect(res.status).toBe(200)
    await expect(res.arrayBuffer()).rejects.toThrow()
    const row = await usageRow(res.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ endpoint: "audio.speech", status: 200, provider: "openai" })
    expect(row.error).toMatch(/broke off/)
  })

  it("an Idempotency-Key replays the streamed audio byte for byte without asking the upstream again", async () => {
    const audio = sineMp3(0.5)
    up.next({ audio, chunks: 5 })
    const ask = () =>
      fetch(`${gw.url}/v1/audio/speech`, {
        method: "POST",
        headers: { ...admin, "content-type": "application/json", "idempotency-key": "speak-once" },
        body: JSON.stringify({ model: "oai/tts-1", input: "Once", voice: "alloy" })
      })
    const first = await ask()
    expect(Buffer.from(await first.arrayBuffer()).equals(audio)).toBe(true)
    const again = await ask()
    expect(again.headers.get("x-gateway-idempotent")).toBe("true")
    expect(again.headers.get("content-type")).toBe("audio/mpeg")
    expect(Buffer.from(await again.arrayBuffer()).equals(audio)).toBe(true)
    expect(seen("openai", /speech/)).toHaveLength(1)
  })

  it("bad input is a 400 naming the field", async () => {
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ model: "oai/tts-1", voice: "alloy" }, "input", /input: Field required/],
      [{ model: "oai/tts-1", input: "   ", voice: "alloy" }, "input", /must not be empty/],
      [{ model: "oai/tts-1", input: "hi", voice: "alloy", response_format: "ogg" }, "response_format", /"mp3" or "opus"/],
      [{ model: "oai/tts-1", input: "hi", voice: "alloy", speed: 9 }, "speed", /between 0.25 and 4/],
      [{ model: "oai/tts-1", input: "hi", voice: "alloy", stream_format: "sse" }, "stream_format", /only "audio"/],
      [{ input: "hi", voice: "alloy" }, "model", /model: Field required/]
    ]
    for (const [body, param, message] of cases) {
      const res = await call(`${gw.url}/v1/audio/speech`, { body, headers: admin })
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.error.param).toBe(param)
      expect(res.body.error.message).toMatch(message)
    }
    // A model that cannot speak: a chat model.
    const chat = await call(`${gw.url}/v1/audio/speech`, {
      body: { model: "gem/gemini-2.5-flash", input: "hi", voice: "alloy" },
      headers: admin
    })
    expect(chat.status).toBe(400)
    expect(chat.body.error).toMatchObject({ param: "model", code: "model_not_supported" })
    expect(chat.body.error.message).toMatch(/offers no speech/)
    expect(up.requests).toHaveLength(0)
  })
})

describe("POST /v1/audio/transcriptions", () => {
  it("OpenAI-compatible: the multipart is forwarded, and duration is the one measured from the WAV, not the upstream's", async () => {
    up.next({ text: "Hello there.", claimedDuration: 42.5 })
    const { data, response } = await client.audio.transcriptions
      .create({ file: await upload(wav15), model: "oai/whisper-1", language: "en", prompt: "Greetings", temperature: 0.2 })
      .withResponse()
    expect(data).toEqual({ task: "transcribe", language: "english", duration: 1.5, text: "Hello there." })

    const got = last("openai")
    expect(got.path).toBe("/v1/audio/transcriptions")
    expect(got.headers.authorization).toBe("Bearer sk-oai-upstream")
    expect(got.form!.fields).toEqual({
      model: ["whisper-1"],
      response_format: ["verbose_json"],
      language: ["en"],
      prompt: ["Greetings"],
      temperature: ["0.2"]
    })
    expect(got.form!.files).toHaveLength(1)
    expect(got.form!.files[0]).toMatchObject({ field: "file", filename: "speech.wav", type: "audio/wav" })
    expect(got.form!.files[0]!.bytes.equals(wav15)).toBe(true)

    // 1.5 s at $0.006 a minute.
    expect(response.headers.get("x-gateway-response-cost")).toBe(fixed(1.5 * (0.006 / 60)))
    expect(response.headers.get("x-gateway-model")).toBe("whisper-1")
    expect(response.headers.get("x-gateway-provider")).toBe("openai")
    const row = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ endpoint: "audio.transcriptions", status: 200, provider: "openai", model: "whisper-1", stream: 0 })
    expect(row.cost_usd).toBeCloseTo(1.5 * (0.006 / 60), 12)
  })

  it("an MP3 upload's duration is the one music-metadata reads from it", async () => {
    const mp3 = sineMp3(2)
    const measured = (await parseBuffer(mp3, { mimeType: "audio/mpeg" }, { duration: true })).format.duration!
    const data = await client.audio.transcriptions.create({
      file: await upload(mp3, "clip.mp3", "audio/mpeg"),
      model: "groq/whisper-large-v3-turbo"
    })
    expect(data).toMatchObject({ task: "transcribe", duration: Math.round(measured * 1000) / 1000 })
    expect(measured).toBeGreaterThan(1.95)
    expect(last("openai").form!.files[0]).toMatchObject({ filename: "clip.mp3", type: "audio/mpeg" })
  })

  it("gpt-4o-transcribe is asked for json and priced by the tokens it reports, not by the second as well", async () => {
    up.next({ text: "Token priced.", tokens: { input: 140, output: 45 } })
    const { data, response } = await client.audio.transcriptions
      .create({ file: await upload(wav15), model: "oai/gpt-4o-transcribe" })
      .withResponse()
    expect(data).toMatchObject({ text: "Token priced.", task: "transcribe", duration: 1.5, language: null })
    expect((data as any).usage).toMatchObject({ type: "tokens", input_tokens: 140, output_tokens: 45 })
    expect(last("openai").form!.fields["response_format"]).toEqual(["json"])
    expect(response.headers.get("x-gateway-response-cost")).toBe(fixed((140 * 6 + 45 * 10) / 1e6))
    expect(response.headers.get("x-gateway-tokens-in")).toBe("140")
    expect(response.headers.get("x-gateway-tokens-out")).toBe("45")
    const row = await usageRow(response.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ tokens_in: 140, tokens_out: 45 })
    expect(row.cost_usd).toBeCloseTo((140 * 6 + 45 * 10) / 1e6, 12)
  })

  it("text, srt, vtt and verbose_json: the gateway renders them, from the upstream's segments and words", async () => {
    up.always({ text: "First sentence. Second one." })
    const text = await client.audio.transcriptions.create({ file: await upload(wav15), model: "oai/whisper-1", response_format: "text" })
    expect(text).toBe("First sentence. Second one.\n")
    const srt = await client.audio.transcriptions.create({ file: await upload(wav15), model: "oai/whisper-1", response_format: "srt" })
    expect(srt).toBe("1\n00:00:00,000 --> 00:00:00,600\nFirst sentence.\n\n2\n00:00:00,700 --> 00:00:01,300\nSecond one.\n\n")
    const vtt = await client.audio.transcriptions.create({ file: await upload(wav15), model: "oai/whisper-1", response_format: "vtt" })
    expect(vtt).toBe("WEBVTT\n\n00:00:00.000 --> 00:00:00.600\nFirst sentence.\n\n00:00:00.700 --> 00:00:01.300\nSecond one.\n\n")
    const verbose = await client.audio.transcriptions.create({
      file: await upload(wav15),
      model: "oai/whisper-1",
      response_format: "verbose_json",
      timestamp_granularities: ["word", "segment"]
    })
    expect(verbose).toMatchObject({ task: "transcribe", language: "english", duration: 1.5, text: "First sentence. Second one." })
    expect(verbose.segments!.map((s) => [s.start, s.end, s.text])).toEqual([
      [0, 0.6, " First sentence."],
      [0.7, 1.3, " Second one."]
    ])
    expect(verbose.words!.map((w) => w.word)).toEqual(["First", "sentence.", "Second", "one."])
    expect(last("openai").form!.fields["timestamp_granularities[]"]).toEqual(["word", "segment"])
  })

  it("Deepgram: the raw audio with its content type and a Token; srt is built from its words; the duration is measured", async () => {
    up.always({ text: "Hello world. How are you?", claimedDuration: 31 })
    const { data, response } = await client.audio.transcriptions
      .create({ file: await upload(wav15), model: "dg/nova-3", response_format: "verbose_json", timestamp_granularities: ["word"] })
      .withResponse()
    expect(data).toMatchObject({ task: "transcribe", language: "en", duration: 1.5, text: "Hello world. How are you?" })
    expect(data.words!.map((w) => w.word)).toEqual(["Hello", "world.", "How", "are", "you?"])
    const got = last("deepgram")
    expect(got.path).toBe("/v1/listen")
    expect(Object.fromEntries(got.query)).toEqual({ model: "nova-3", smart_format: "true", punctuate: "true", detect_language: "true" })
    expect(got.headers.authorization).toBe("Token dg-upstream-key")
    expect(got.headers["content-type"]).toBe("audio/wav")
    expect(got.raw.equals(wav15)).toBe(true)
    expect(response.headers.get("x-gateway-response-cost")).toBe(fixed(1.5 * (0.0043 / 60)))

    const srt = await client.audio.transcriptions.create({
      file: await upload(wav15),
      model: "dg/nova-3",
      language: "en",
      response_format: "srt"
    })
    expect(srt).toBe("1\n00:00:00,000 --> 00:00:00,450\nHello world.\n\n2\n00:00:00,500 --> 00:00:01,200\nHow are you?\n\n")
    expect(last("deepgram").query.get("language")).toBe("en")
  })

  it("Gemini: the audio goes inline with an instruction; a single cue spans the measured duration; priced by tokens", async () => {
    up.always({ text: "Bonjour tout le monde", geminiUsage: { prompt: 60, candidates: 8 } })
    const { data, response } = await client.audio.transcriptions
      .create({ file: await upload(wav15), model: "gem/gemini-2.5-flash" })
      .withResponse()
    expect(data).toEqual({ task: "transcribe", language: "en", duration: 1.5, text: "Bonjour tout le monde" })
    const got = last("gemini")
    expect(got.path).toBe("/v1beta/models/gemini-2.5-flash:generateContent")
    const parts = got.json.contents[0].parts
    expect(parts[0].text).toMatch(/^Transcribe this audio verbatim/)
    expect(parts[1].inlineData.mimeType).toBe("audio/wav")
    expect(Buffer.from(parts[1].inlineData.data, "base64").equals(wav15)).toBe(true)
    expect(got.json.generationConfig.responseMimeType).toBe("application/json")
    expect(response.headers.get("x-gateway-response-cost")).toBe(fixed((60 * 0.3 + 8 * 2.5) / 1e6))

    const vtt = await client.audio.transcriptions.create({
      file: await upload(wav15),
      model: "gem/gemini-2.5-flash",
      response_format: "vtt"
    })
    expect(vtt).toBe("WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nBonjour tout le monde\n\n")
  })

  it("ElevenLabs Scribe: the multipart with model_id, its words (spacing left out) make the segments", async () => {
    up.always({ text: "One two three." })
    const data = await client.audio.transcriptions.create({
      file: await upload(wav15),
      model: "el/scribe_v1",
      response_format: "verbose_json",
      timestamp_granularities: ["word", "segment"]
    })
    expect(data).toMatchObject({ language: "eng", duration: 1.5, text: "One two three." })
    expect(data.words).toEqual([
      { word: "One", start: 0, end: 0.2 },
      { word: "two", start: 0.25, end: 0.45 },
      { word: "three.", start: 0.5, end: 0.7 }
    ])
    expect(data.segments).toEqual([{ id: 0, start: 0, end: 0.7, text: "One two three." }])
    const got = last("elevenlabs")
    expect(got.path).toBe("/v1/speech-to-text")
    expect(got.form!.fields).toMatchObject({ model_id: ["scribe_v1"], timestamps_granularity: ["word"] })
    expect(got.form!.files[0]!.bytes.equals(wav15)).toBe(true)
  })

  it("falls back to the second connection when the first answers 503", async () => {
    down.always({ status: 503 })
    up.next({ text: "Second answered." })
    const { data, response } = await client.audio.transcriptions.create({ file: await upload(wav15), model: "ears-1" }).withResponse()
    expect(data).toMatchObject({ text: "Second answered.", duration: 1.5 })
    expect(response.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(down.requests).toHaveLength(1)
    expect(await usageRow(response.headers.get("x-gateway-request-id"))).toMatchObject({
      endpoint: "audio.transcriptions",
      status: 200,
      fallback_attempts: 1
    })
  })

  it("bad input is a 4xx naming the problem", async () => {
    const wav = new Blob([wav15], { type: "audio/wav" })
    const noFile = await postForm("/v1/audio/transcriptions", { model: "oai/whisper-1" })
    expect(noFile.status).toBe(400)
    expect(noFile.body.error).toMatchObject({ param: "file" })

    const noModel = await postForm("/v1/audio/transcriptions", { file: wav })
    expect(noModel.status).toBe(400)
    expect(noModel.body.error).toMatchObject({ param: "model" })

    const json = await call(`${gw.url}/v1/audio/transcriptions`, { body: { model: "oai/whisper-1", file: "speech.wav" }, headers: admin })
    expect(json.status).toBe(415)
    expect(json.body.error.message).toMatch(/expected a multipart\/form-data body, got application\/json/)

    const format = await postForm("/v1/audio/transcriptions", { model: "oai/whisper-1", response_format: "diarized_json", file: wav })
    expect(format.status).toBe(400)
    expect(format.body.error).toMatchObject({ param: "response_format" })
    expect(format.body.error.message).toMatch(/"verbose_json"/)

    const granularity = await postForm("/v1/audio/transcriptions", {
      model: "oai/whisper-1",
      "timestamp_granularities[]": "sentence",
      file: wav
    })
    expect(granularity.status).toBe(400)
    expect(granularity.body.error).toMatchObject({ param: "timestamp_granularities[]" })

    const temperature = await postForm("/v1/audio/transcriptions", { model: "oai/whisper-1", temperature: "hot", file: wav })
    expect(temperature.status).toBe(400)
    expect(temperature.body.error).toMatchObject({ param: "temperature" })

    const notAudio = await postForm("/v1/audio/transcriptions", {
      model: "oai/whisper-1",
      file: new Blob(["just some text, not audio"], { type: "audio/wav" })
    })
    expect(notAudio.status).toBe(400)
    expect(notAudio.body.error).toMatchObject({ param: "file", code: "invalid_audio" })
    expect(notAudio.body.error.message).toMatch(/could not read the audio/)

    const big = await postForm("/v1/audio/transcriptions", {
      model: "oai/whisper-1",
      file: new Blob([Buffer.concat([wav15, Buffer.alloc(25 * 1024 * 1024)])], { type: "audio/wav" })
    })
    expect(big.status).toBe(413)
    expect(big.body.error).toMatchObject({ param: "file", code: "file_too_large" })
    expect(big.body.error.message).toMatch(/larger than 26214400 bytes/)

    expect(up.requests).toHaveLength(0)
  })
})

describe("POST /v1/audio/translations", () => {
  it("OpenAI-compatible: forwarded to /audio/translations without a language; the answer is English", async () => {
    up.next({ text: "Good morning." })
    const { data, response } = await client.audio.translations
      .create({ file: await upload(wav15), model: "oai/whisper-1", prompt: "A greeting" })
      .withResponse()
    expect(data).toEqual({ task: "translate", language: "english", duration: 1.5, text: "Good morning." })
    const got = last("openai")
    expect(got.path).toBe("/v1/audio/translations")
    expect(got.form!.fields).toEqual({ model: ["whisper-1"], response_format: ["verbose_json"], prompt: ["A greeting"] })
    expect(await usageRow(response.headers.get("x-gateway-request-id"))).toMatchObject({ endpoint: "audio.translations", status: 200 })
  })

  it("Gemini translates by instruction; Deepgram offers no translation (400 naming the model)", async () => {
    up.always({ text: "Hello everyone" })
    const data = await client.audio.translations.create({
      file: await upload(wav15),
      model: "gem/gemini-2.5-flash",
      response_format: "text"
    })
    expect(data).toBe("Hello everyone\n")
    expect(last("gemini").json.contents[0].parts[0].text).toMatch(/^Translate the speech in this audio into English/)

    const form = new Blob([wav15], { type: "audio/wav" })
    const deepgram = await postForm("/v1/audio/translations", { model: "dg/nova-3", file: form })
    expect(deepgram.status).toBe(400)
    expect(deepgram.body.error).toMatchObject({ param: "model" })
    expect(deepgram.body.error.message).toMatch(/offers no translation/)
    expect(seen("deepgram")).toHaveLength(0)
  })
})
