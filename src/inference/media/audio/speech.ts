/**
 * `POST /v1/audio/speech`, one try per upstream family. OpenAI-compatible (`/audio/speech`),
 * ElevenLabs (`/v1/text-to-speech/{voice}/stream`) and Deepgram (`/v1/speak`) answer audio bytes,
 * relayed to the client as they arrive; Gemini TTS (`generateContent`, audio modality) answers
 * base64 PCM in JSON, which the gateway wraps as WAV, passes raw, or encodes as MP3.
 * docs/media.md ("Audio") has the field mapping and the voice tables.
 */
import * as Effect from "effect/Effect"
import type { AccountingShape } from "../../../services/accounting/Accounting.js"
import type { MediaUnits } from "../../../services/accounting/cost.js"
import type { Usage } from "../../../domain/canonical.js"
import { encodeComponent } from "../../../kernel/untrusted.js"
import { attemptFailed, type AttemptFailed } from "../../../kernel/attempts.js"
import type { InferenceShape } from "../../call.js"
import { clientError } from "../../../kernel/errors.js"
import type { AttemptRequest } from "../../fallback.js"
import { type HttpRequestContext, responseHeaders, startStream, writeStream, endStream } from "../../io.js"
import { openAiChat } from "../../../upstream/formats/openai-chat.js"
import type { Candidate } from "../../../services/routing/types.js"
import type { CustomCall } from "../../../upstream/client/executors.js"
import type { UpstreamResponse } from "../../../upstream/client/UpstreamHttp.js"
import { badAnswer, headerValue, type MediaOutcome, mediaBytes, sendMedia, streamedMediaHeaders } from "../run.js"
import { audioFamily, chargedUnits, unable } from "./family.js"
import { mp3Of, type Pcm, PCM_RATE, pcmOfWav, rateOf, wavOf } from "./pcm.js"

export type SpeechFormat = "mp3" | "opus" | "aac" | "flac" | "wav" | "pcm"
export const SPEECH_FORMATS: ReadonlyArray<SpeechFormat> = ["mp3", "opus", "aac", "flac", "wav", "pcm"]

/** The content type of each format, whatever the upstream labelled it. */
export const SPEECH_CONTENT_TYPES: Readonly<Record<SpeechFormat, string>> = {
  mp3: "audio/mpeg",
  opus: "audio/ogg",
  aac: "audio/aac",
  flac: "audio/flac",
  wav: "audio/wav",
  pcm: "audio/pcm"
}

export interface SpeechRequest extends AttemptRequest {
  readonly input: string
  readonly voice: string
  readonly responseFormat: SpeechFormat
  readonly speed: number | undefined
  readonly instructions: string | undefined
}

export interface Spoken extends MediaOutcome {
  /** A whole answer for the route to write (Gemini's, ElevenLabs' WAV); absent when the try streamed it. */
  readonly audio?: Buffer
}

/** Characters as the speech upstreams count them (code points, not UTF-16 units). */
export const characters = (text: string): number => {
  let n = 0
  for (const _ of text) n++
  return n
}

// ---------------------------------------------------------------- voices

/**
 * OpenAI's voice names on ElevenLabs: premade voices (`GET /v1/voices`, as listed in 2026). Any
 * other value is taken as an ElevenLabs voice id.
 */
export const ELEVENLABS_VOICES: Readonly<Record<string, string>> = {
  alloy: "SAz9YHcvj6GT2YYXdXww", // River
  ash: "CwhRBWXzGAHq8TQ4Fs17", // Roger
  ballad: "JBFqnCBsd6RMkjVDRZzb", // George
  coral: "FGY2WhTYpPnrIDTdsKH5", // Laura
  echo: "TX3LPaxmHKxFdv7VOQHJ", // Liam
  fable: "onwK4e9ZLuTAKqWW03F9", // Daniel
  onyx: "pNInz6obpgDQGcFmaJgB", // Adam
  nova: "cgSgspJ2msm6clMCkdW9", // Jessica
  sage: "XrExE9yKIg1WjnnlVkGX", // Matilda
  shimmer: "EXAVITQu4vr4xnSDxMaL", // Sarah
  verse: "iP95p4xoKVk53GoZ742B", // Chris
  marin: "Xb7hH8MSUJpSbSDYk0k2", // Alice
  cedar: "nPczCjzI2devNBz1zQrb" // Brian
}

/** OpenAI's voice names on Gemini TTS (prebuilt voices). Any other value is passed as a Gemini voice name. */
export const GEMINI_VOICES: Readonly<Record<string, string>> = {
  alloy: "Kore",
  ash: "Orus",
  ballad: "Aoede",
  coral: "Leda",
  echo: "Charon",
  fable: "Fenrir",
  onyx: "Alnilam",
  nova: "Zephyr",
  sage: "Sadaltager",
  shimmer: "Despina",
  verse: "Puck",
  marin: "Sulafat",
  cedar: "Iapetus"
}

const voiceIn = (table: Readonly<Record<string, string>>, voice: string): string => table[voice.toLowerCase()] ?? voice

// ---------------------------------------------------------------- per family

/** ElevenLabs' `output_format` for each format it serves (WAV is its 24 kHz PCM, wrapped by the gateway). */
const ELEVENLABS_FORMATS: Partial<Record<SpeechFormat, string>> = {
  mp3: "mp3_44100_128",
  opus: "opus_48000_64",
  pcm: `pcm_${PCM_RATE}`,
  wav: `pcm_${PCM_RATE}`
}

/** Deepgram's `encoding` (and container, rate) for each format. */
const DEEPGRAM_FORMATS: Readonly<Record<SpeechFormat, string>> = {
  mp3: "encoding=mp3",
  opus: "encoding=opus",
  aac: "encoding=aac",
  flac: "encoding=flac",
  wav: `encoding=linear16&container=wav&sample_rate=${PCM_RATE}`,
  pcm: `encoding=linear16&container=none&sample_rate=${PCM_RATE}`
}

/** What Gemini TTS gives through the gateway: its PCM raw, wrapped, or encoded with lamejs. */
const GEMINI_FORMATS: ReadonlyArray<SpeechFormat> = ["mp3", "wav", "pcm"]

/** Rates an MP3 (MPEG 1, 2 and 2.5 layer III) can have. */
const MP3_RATES = new Set([8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000])

/** ElevenLabs takes speeds 0.7 to 1.2 (voice_settings.speed). */
const elevenSpeed = (speed: number) => Math.min(1.2, Math.max(0.7, speed))

const openAiCall = (r: SpeechRequest, c: Candidate): CustomCall => ({
  path: "/audio/speech",
  accept: "application/octet-stream",
  json: {
    model: c.model,
    input: r.input,
    voice: r.voice,
    response_format: r.responseFormat,
    ...(r.speed !== undefined ? { speed: r.speed } : {}),
    ...(r.instructions !== undefined ? { instructions: r.instructions } : {})
  }
})

const elevenLabsCall = (r: SpeechRequest, c: Candidate, outputFormat: string, stream: boolean): CustomCall => ({
  path: `/v1/text-to-speech/${encodeComponent(voiceIn(ELEVENLABS_VOICES, r.voice))}${stream ? "/stream" : ""}?output_format=${outputFormat}`,
  accept: "*/*",
  json: { text: r.input, model_id: c.model, ...(r.speed !== undefined ? { voice_settings: { speed: elevenSpeed(r.speed) } } : {}) }
})

const deepgramCall = (r: SpeechRequest, c: Candidate): CustomCall => ({
  path: `/v1/speak?model=${encodeComponent(c.model)}&${DEEPGRAM_FORMATS[r.responseFormat]}`,
  accept: "*/*",
  json: { text: r.input }
})

const geminiCall = (r: SpeechRequest, c: Candidate): CustomCall => ({
  path: `/v1beta/models/${encodeComponent(c.model)}:generateContent`,
  json: {
    contents: [{ role: "user", parts: [{ text: r.instructions ? `${r.instructions}: ${r.input}` : r.input }] }],
    generationConfig: {
      responseModalities: ["AUDIO"],
      speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: voiceIn(GEMINI_VOICES, r.voice) } } }
    }
  }
})

// ---------------------------------------------------------------- the relay

const ERROR_TEXT = (e: unknown) => (e instanceof Error ? e.message : String(e))

/**
 * Relays an audio body to the client as it arrives: the head (with the cost headers) goes with the
 * first chunk, so an upstream that fails before any byte can still be replaced by the next
 * target; writes wait for the client to drain. A client that leaves destroys the upstream body.
 */
const pipeAudio = (ctx: HttpRequestContext, res: UpstreamResponse, head: () => Readonly<Record<string, string | number>>) =>
  Effect.async<{ readonly sent: number; readonly error: unknown; readonly firstAt: number | null }>((resume) => {
    const body = res.body
    let sent = 0
    let firstAt: number | null = null
    let done = false
    const finish = (error: unknown) => {
      if (done) return
      done = true
      body.off("data", onData)
      body.off("end", onEnd)
      body.off("error", onError)
      ctx.res.off("drain", onDrain)
      resume(Effect.succeed({ sent, error, firstAt }))
    }
    const onDrain = () => body.resume()
    const onData = (chunk: Buffer) => {
      if (chunk.length === 0) return
      if (sent === 0) {
        firstAt = Date.now()
        startStream(ctx, head())
      }
      sent += chunk.length
      if (!writeStream(ctx, chunk)) {
        body.pause()
        ctx.res.once("drain", onDrain)
      }
    }
    const onEnd = () => {
      if (sent > 0) endStream(ctx, "")
      finish(undefined)
    }
    const onError = (e: unknown) => {
      body.destroy()
      finish(e ?? new Error("the upstream's answer broke off"))
    }
    body.on("data", onData)
    body.on("end", onEnd)
    body.on("error", onError)
    return Effect.sync(() => {
      done = true
      body.destroy()
    })
  })

/** A broken body as the resilience layer reads it: a silent one stalled, anything else cut. */
const bodyFailure = (e: unknown) => {
  const stalled = (e as { code?: unknown } | undefined)?.code === "UND_ERR_BODY_TIMEOUT"
  const message = stalled ? "the upstream's audio stalled" : `the upstream's audio broke off: ${ERROR_TEXT(e)}`
  return {
    info: {
      status: stalled ? 504 : 502,
      kind: stalled ? ("stalled" as const) : ("cut" as const),
      message,
      code: stalled ? "upstream_stalled" : "stream_interrupted"
    },
    message
  }
}

// ---------------------------------------------------------------- the try

/** One speech try against one candidate, by its family. */
export const trySpeech =
  (inference: InferenceShape, accounting: AccountingShape) =>
  (r: SpeechRequest, c: Candidate): Effect.Effect<Spoken, AttemptFailed> => {
    const units: MediaUnits = { characters: characters(r.input) }
    const contentType = SPEECH_CONTENT_TYPES[r.responseFormat]

    /** Sends `call`, relays the audio as it comes. */
    const relayed = (call: CustomCall) =>
      Effect.gen(function* () {
        const res = yield* sendMedia(inference, r, c, call, { readWhole: false })
        const piped = yield* pipeAudio(r.ctx, res, () => {
          streamedMediaHeaders(accounting, r.ctx, c, units)
          return responseHeaders(r.ctx, { "content-type": contentType, "cache-control": "no-cache", "x-accel-buffering": "no" })
        })
        if (piped.sent === 0) {
          if (piped.error === undefined) return yield* Effect.fail(badAnswer(r, c.connection, "answered no audio"))
          const { info, message } = bodyFailure(piped.error)
          return yield* Effect.fail(
            attemptFailed(
              clientError(r.format, {
                status: info.status,
                kind: "upstream",
                message: `${c.connection.name}: ${message}`,
                code: info.code
              }),
              info
            )
          )
        }
        const broken = piped.error === undefined ? undefined : bodyFailure(piped.error)
        return {
          status: 200,
          usage: undefined,
          ttftMs: piped.firstAt === null ? null : piped.firstAt - r.ctx.startedAt,
          error: broken ? broken.message : null,
          ...(broken ? { streamFailure: broken.info } : {}),
          headers: headerValue(res.headers),
          units
        } satisfies Spoken
      })

    switch (audioFamily(c.connection)) {
      case "openai":
        return relayed(openAiCall(r, c))
      case "deepgram":
        return relayed(deepgramCall(r, c))
      case "elevenlabs": {
        const outputFormat = ELEVENLABS_FORMATS[r.responseFormat]
        if (outputFormat === undefined) {
          return unable(
            `ElevenLabs speech (${c.connection.name}) offers mp3, opus, wav and pcm; ${r.responseFormat} would need an encoder the gateway does not ship`,
            "response_format"
          )
        }
        if (r.responseFormat !== "wav") return relayed(elevenLabsCall(r, c, outputFormat, true))
        // A WAV header states the length: the PCM is read whole, then wrapped.
        return Effect.gen(function* () {
          const res = yield* sendMedia(inference, r, c, elevenLabsCall(r, c, outputFormat, false))
          const pcm = yield* mediaBytes(inference, r, c.connection, res)
          if (pcm.length === 0) return yield* Effect.fail(badAnswer(r, c.connection, "answered no audio"))
          return {
            status: 200,
            usage: undefined,
            ttftMs: null,
            error: null,
            headers: headerValue(res.headers),
            units,
            audio: wavOf({ data: pcm, sampleRate: PCM_RATE, channels: 1 })
          } satisfies Spoken
        })
      }
      case "gemini": {
        if (!GEMINI_FORMATS.includes(r.responseFormat)) {
          return unable(
            `Gemini TTS (${c.connection.name}) answers raw PCM, which the gateway gives as mp3, wav or pcm; ${r.responseFormat} would need an encoder the gateway does not ship`,
            "response_format"
          )
        }
        return Effect.gen(function* () {
          const res = yield* sendMedia(inference, r, c, geminiCall(r, c))
          const answer = yield* geminiAudio(r, c, yield* mediaBytes(inference, r, c.connection, res))
          const { pcm, usage } = answer
          if (r.responseFormat === "mp3" && !MP3_RATES.has(pcm.sampleRate))
            return yield* Effect.fail(badAnswer(r, c.connection, `answered PCM at ${pcm.sampleRate} Hz, which MP3 cannot carry`))
          const audio =
            r.responseFormat === "wav" ? wavOf(pcm) : r.responseFormat === "pcm" ? pcm.data : yield* Effect.promise(() => mp3Of(pcm))
          return {
            status: 200,
            usage,
            ttftMs: null,
            error: null,
            headers: headerValue(res.headers),
            units: chargedUnits(accounting, c, usage, units),
            audio
          } satisfies Spoken
        })
      }
      default:
        return unable(`${c.connection.name} (${c.connection.provider.id}) has no speech API`, "model")
    }
  }

/** Gemini's answer: the audio part's PCM (or the PCM inside its WAV), and the tokens it reports. */
const geminiAudio = (
  r: SpeechRequest,
  c: Candidate,
  bytes: Buffer
): Effect.Effect<{ readonly pcm: Pcm; readonly usage: Partial<Usage> | undefined }, AttemptFailed> => {
  let answer: any
  try {
    answer = JSON.parse(bytes.toString("utf8"))
  } catch {
    return Effect.fail(badAnswer(r, c.connection, "answered something that is not JSON"))
  }
  const blocked = answer?.promptFeedback?.blockReason
  if (typeof blocked === "string") {
    return Effect.fail(
      attemptFailed(
        clientError(openAiChat, {
          status: 400,
          kind: "invalid_request",
          message: `${c.connection.name} refused the input (${blocked})`,
          code: "content_blocked",
          param: "input"
        }),
        undefined
      )
    )
  }
  const parts: ReadonlyArray<any> = Array.isArray(answer?.candidates?.[0]?.content?.parts) ? answer.candidates[0].content.parts : []
  const inline = parts.map((p) => p?.inlineData ?? p?.inline_data).find((d) => typeof d?.data === "string")
  if (!inline)
    return Effect.fail(badAnswer(r, c.connection, `answered no audio (finish reason ${answer?.candidates?.[0]?.finishReason ?? "none"})`))
  const data = Buffer.from(inline.data, "base64")
  const mimeType = String(inline.mimeType ?? inline.mime_type ?? "")
  const pcm: Pcm | undefined = /wav/i.test(mimeType)
    ? pcmOfWav(data)
    : /L16|pcm/i.test(mimeType) || mimeType === ""
      ? { data: data.subarray(0, data.length - (data.length % 2)), sampleRate: rateOf(mimeType), channels: 1 }
      : undefined
  if (!pcm || pcm.data.length === 0)
    return Effect.fail(badAnswer(r, c.connection, `answered audio the gateway cannot read (${mimeType.slice(0, 60)})`))
  const meta = answer?.usageMetadata
  const usage =
    meta && typeof meta.promptTokenCount === "number"
      ? { inputTokens: meta.promptTokenCount, outputTokens: typeof meta.candidatesTokenCount === "number" ? meta.candidatesTokenCount : 0 }
      : undefined
  return Effect.succeed({ pcm, usage })
}
