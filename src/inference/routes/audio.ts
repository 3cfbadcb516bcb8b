/**
 * The audio endpoints: `POST /v1/audio/speech` (JSON in, audio bytes out, streamed as they
 * arrive), `POST /v1/audio/transcriptions` and `POST /v1/audio/translations` (multipart in,
 * the upload spooled to disk and its duration measured before any upstream is called). Each is
 * one `runMedia` over the guarded attempt; the per-family tries live in src/inference/media/audio/.
 */
import * as Effect from "effect/Effect"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { checkParams, invalidParam, number, oneOf, params, requireParam, string } from "../../upstream/formats/params.js"
import { RequestDecodeError } from "../../upstream/formats/format.js"
import { field, fieldValues, filesOf, type MultipartError, parseMultipart, readUpload } from "../../platform/http/multipart.js"
import { audioFamily } from "../media/audio/family.js"
import { probeAudio } from "../media/audio/probe.js"
import { SPEECH_CONTENT_TYPES, SPEECH_FORMATS, type SpeechFormat, type SpeechRequest, trySpeech } from "../media/audio/speech.js"
import { render, TRANSCRIPT_FORMATS, type TranscriptFormat } from "../media/audio/transcript.js"
import { type TranscriptionRequest, tryTranscription } from "../media/audio/transcription.js"
import { does, runMedia } from "../media/run.js"
import type { Candidate } from "../../services/routing/types.js"
import { clientError, decodeFailure, type InferenceError, tryDecode } from "../../kernel/errors.js"
import { abortStream, type HttpRequestContext, responseHeaders, sendJson, withJsonObject, writeWhole } from "../io.js"
import type { RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

/** Speech: a connection with a speech API whose model speaks. */
const canSpeak = (c: Candidate): boolean => audioFamily(c.connection) !== undefined && does("speech")(c)

/** Transcription: a speech-to-text model, or any Gemini chat model (audio input to generateContent). */
const canTranscribe = (c: Candidate): boolean => {
  const family = audioFamily(c.connection)
  return family !== undefined && (does("transcription")(c) || (family === "gemini" && does("chat")(c)))
}

/** Translation to English: OpenAI-compatible and Gemini (Deepgram and ElevenLabs have none). */
const canTranslate = (c: Candidate): boolean => {
  const family = audioFamily(c.connection)
  return (family === "openai" || family === "gemini") && canTranscribe(c)
}

// ---------------------------------------------------------------- speech

const SPEECH_PARAMS = params({
  voice: string,
  response_format: oneOf(...SPEECH_FORMATS),
  speed: number(0.25, 4),
  instructions: string
})

interface SpeechInput {
  readonly model: string
  readonly input: string
  readonly voice: string
  readonly responseFormat: SpeechFormat
  readonly speed: number | undefined
  readonly instructions: string | undefined
}

const decodeSpeech = (body: Record<string, unknown>): SpeechInput => {
  requireParam(body, "model", string)
  requireParam(body, "input", string)
  checkParams(body, SPEECH_PARAMS)
  const model = (body["model"] as string).trim()
  if (model === "") throw new RequestDecodeError("model: must not be empty", "model")
  if ((body["input"] as string).trim() === "") throw new RequestDecodeError("input: must not be empty", "input")
  const streamFormat = body["stream_format"]
  if (streamFormat !== undefined && streamFormat !== null && streamFormat !== "audio") {
    throw new RequestDecodeError(
      `stream_format: only "audio" is offered (the audio bytes, streamed as they arrive), got ${JSON.stringify(streamFormat).slice(0, 40)}`,
      "stream_format"
    )
  }
  return {
    model,
    input: body["input"] as string,
    // OpenAI requires a voice; Deepgram's model is its voice. Absent: OpenAI's first voice.
    voice: typeof body["voice"] === "string" && body["voice"].trim() !== "" ? body["voice"].trim() : "alloy",
    responseFormat: (body["response_format"] as SpeechFormat | undefined) ?? "mp3",
    speed: (body["speed"] as number | undefined) ?? undefined,
    instructions: (body["instructions"] as string | undefined) ?? undefined
  }
}

const speech = (deps: RouteDeps) => {
  const attempt = trySpeech(deps.inference, deps.accounting)
  const handle = Effect.fnUntraced(function* (ctx: HttpRequestContext, body: Record<string, unknown>) {
    const s = yield* tryDecode(openAiChat, () => decodeSpeech(body))
    const request: SpeechRequest = {
      ctx,
      format: openAiChat,
      model: s.model,
      input: s.input,
      voice: s.voice,
      responseFormat: s.responseFormat,
      speed: s.speed,
      instructions: s.instructions
    }
    const { outcome } = yield* runMedia(deps.inference, deps.accounting, {
      ctx,
      client: openAiChat,
      model: s.model,
      endpoint: "audio.speech",
      what: "speech",
      able: canSpeak,
      request,
      attempt,
      stream: true
    })
    if (outcome.audio) {
      writeWhole(
        ctx,
        200,
        responseHeaders(ctx, { "content-type": SPEECH_CONTENT_TYPES[s.responseFormat], "content-length": outcome.audio.length }),
        outcome.audio
      )
    } else if (outcome.streamFailure) {
      // Cut after the usage row was written: the client sees an incomplete transfer.
      abortStream(ctx, outcome.error ?? outcome.streamFailure.message)
    }
  })
  return (ctx: HttpRequestContext) => withJsonObject(ctx, (body) => handle(ctx, body))
}

// ---------------------------------------------------------------- transcription and translation

/** The OpenAI SDK sends one file; 25 MiB is OpenAI's limit. */
const UPLOAD_LIMITS = { maxFiles: 1, maxFileBytes: 25 * 1024 * 1024 }

const fromMultipart = (e: MultipartError): InferenceError =>
  clientError(openAiChat, {
    status: e.status,
    kind: e.status === 413 ? "too_large" : "invalid_request",
    message: e.message,
    code: e.code,
    param: e.param
  })

const bad = (message: string, param: string, code: string | null = null): InferenceError =>
  clientError(openAiChat, { status: 400, kind: "invalid_request", message, code, param })

/** A number in a form field (`temperature`), or a 400 naming it. */
const formNumber = (
  value: string | undefined,
  name: string,
  min: number,
  max: number
): Effect.Effect<number | undefined, InferenceError> => {
  if (value === undefined || value.trim() === "") return Effect.succeed(undefined)
  const n = Number(value)
  return Number.isFinite(n) && n >= min && n <= max
    ? Effect.succeed(n)
    : Effect.fail(decodeFailure(openAiChat, invalidParam(name, `a number between ${min} and ${max}`, value)))
}

/** Seconds as answers carry them: milliseconds precision. */
const seconds = (s: number) => Math.round(s * 1000) / 1000

const transcription = (deps: RouteDeps, task: "transcribe" | "translate") => {
  const attempt = tryTranscription(deps.inference, deps.accounting)
  const endpoint = task === "transcribe" ? "audio.transcriptions" : "audio.translations"
  return Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const form = yield* Effect.mapError(parseMultipart(ctx.req, UPLOAD_LIMITS, ctx.body), fromMultipart)
    const model = field(form, "model")?.trim()
    if (!model) return yield* bad("model: Field required, expected a model id", "model")
    const file = filesOf(form, "file")[0]
    if (!file) return yield* bad("file: Field required, expected the audio as a file part named 'file'", "file")
    if (file.size === 0) return yield* bad("file: the uploaded file is empty", "file")
    const responseFormat = field(form, "response_format") ?? "json"
    if (!TRANSCRIPT_FORMATS.includes(responseFormat as TranscriptFormat)) {
      return yield* bad(
        `response_format: expected ${TRANSCRIPT_FORMATS.map((f) => JSON.stringify(f)).join(" or ")}, got ${JSON.stringify(responseFormat.slice(0, 40))}`,
        "response_format"
      )
    }
    const granularities = fieldValues(form, "timestamp_granularities")
    const odd = granularities.find((g) => g !== "word" && g !== "segment")
    if (odd !== undefined)
      return yield* bad(
        `timestamp_granularities[]: expected "word" or "segment", got ${JSON.stringify(odd.slice(0, 40))}`,
        "timestamp_granularities[]"
      )
    const stream = field(form, "stream")
    if (stream !== undefined && stream !== "false")
      return yield* bad("stream: streamed transcriptions are not offered; the answer comes whole", "stream")
    const temperature = yield* formNumber(field(form, "temperature"), "temperature", 0, 1)
    const language = field(form, "language")?.trim() || undefined
    const prompt = field(form, "prompt") || undefined
    // The duration is the file's own, measured before any upstream is paid for it.
    const audio = yield* Effect.mapError(probeAudio(file.path), (why) =>
      bad(
        `file: the gateway could not read the audio (${why.slice(0, 200)}); send mp3, wav, m4a, flac, ogg or webm`,
        "file",
        "invalid_audio"
      )
    )
    const request: TranscriptionRequest = {
      ctx,
      format: openAiChat,
      model,
      task,
      file,
      bytes: yield* Effect.cached(readUpload(file)),
      audio,
      language: task === "transcribe" ? language : undefined,
      prompt,
      temperature,
      granularities,
      responseFormat: responseFormat as TranscriptFormat
    }
    const { outcome } = yield* runMedia(deps.inference, deps.accounting, {
      ctx,
      client: openAiChat,
      model,
      endpoint,
      what: task === "transcribe" ? "transcription" : "translation",
      able: task === "transcribe" ? canTranscribe : canTranslate,
      request,
      attempt
    })
    const answer = render(outcome.transcript, {
      format: request.responseFormat,
      task,
      duration: seconds(audio.duration),
      // A translation is English; otherwise the language asked for, when the upstream does not say.
      language: task === "translate" ? "english" : (language ?? null),
      granularities
    })
    sendJson(ctx, 200, typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body), { "content-type": answer.contentType })
  }, Effect.scoped)
}

export const audioRoutes = (deps: RouteDeps): ReadonlyArray<RouteDef> => [
  { method: "POST", path: "/v1/audio/speech", format: openAiChat, handle: speech(deps) },
  { method: "POST", path: "/v1/audio/transcriptions", format: openAiChat, handle: transcription(deps, "transcribe") },
  { method: "POST", path: "/v1/audio/translations", format: openAiChat, handle: transcription(deps, "translate") }
]
