/**
 * `POST /v1/audio/transcriptions` and `/v1/audio/translations`, one try per upstream family:
 * OpenAI-compatible (incl. Groq; the multipart forwarded), Deepgram (`/v1/listen`, the raw audio),
 * ElevenLabs (`/v1/speech-to-text`) and Gemini (the audio inline in `generateContent`, with an
 * instruction). Each answers a `Transcript`; the route renders the client's format from it, with
 * the duration the gateway measured. docs/media.md ("Audio") has the field mapping.
 */
import * as Effect from "effect/Effect"
import type { AccountingShape } from "../../../services/accounting/Accounting.js"
import type { Usage } from "../../../domain/canonical.js"
import { encodeComponent } from "../../../kernel/untrusted.js"
import { type FormPart, multipartBody, type UploadedFile, uploadBody } from "../../../platform/http/multipart.js"
import type { AttemptFailed } from "../../../kernel/attempts.js"
import type { InferenceShape } from "../../call.js"
import type { AttemptRequest } from "../../fallback.js"
import type { Candidate } from "../../../services/routing/types.js"
import type { CustomCall } from "../../../upstream/client/executors.js"
import { badAnswer, headerValue, type MediaOutcome, mediaBytes, sendMedia } from "../run.js"
import { audioFamily, chargedUnits, FAMILY_NAMES, unable } from "./family.js"
import type { AudioInfo } from "./probe.js"
import type { Segment, Transcript, TranscriptFormat, Word } from "./transcript.js"

export interface TranscriptionRequest extends AttemptRequest {
  readonly task: "transcribe" | "translate"
  readonly file: UploadedFile
  /** The upload's bytes, read once (for whichever target is tried). */
  readonly bytes: Effect.Effect<Buffer>
  /** What the gateway measured: duration, container. */
  readonly audio: AudioInfo
  readonly language: string | undefined
  readonly prompt: string | undefined
  readonly temperature: number | undefined
  readonly granularities: ReadonlyArray<string>
  readonly responseFormat: TranscriptFormat
}

export interface Transcribed extends MediaOutcome {
  readonly transcript: Transcript
}

/** OpenAI's newer transcription models answer `json` only: the gateway asks them for it and renders the rest. */
const JSON_ONLY = /(^|\/)gpt-(4o(-mini)?-)?transcribe/i

/** The content type sent with the audio: the client's when it names audio or video, else the detected container's. */
const contentTypeOf = (r: TranscriptionRequest): string => (/^(audio|video)\//i.test(r.file.mimeType) ? r.file.mimeType : r.audio.mimeType)

/** The file name sent upstream: the client's when it ends in a known extension (OpenAI judges by it), else one that does. */
const filenameOf = (r: TranscriptionRequest): string =>
  /\.(flac|mp3|mp4|mpeg|mpga|m4a|ogg|oga|opus|wav|webm|aac|aiff?)$/i.test(r.file.filename) ? r.file.filename : `audio.${r.audio.extension}`

const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined)
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined)

const parseJson = (bytes: Buffer): unknown => {
  try {
    return JSON.parse(bytes.toString("utf8"))
  } catch {
    return undefined
  }
}

// ---------------------------------------------------------------- OpenAI-compatible

/** The form fields and the upload (streamed from its spooled file). */
const formWith = (r: TranscriptionRequest, fields: ReadonlyArray<readonly [string, string]>) =>
  multipartBody([
    ...fields.map(([name, value]): FormPart => ({ name, value })),
    { name: "file", filename: filenameOf(r), contentType: contentTypeOf(r), path: r.file.path, size: r.file.size }
  ])

const openAiCall = (r: TranscriptionRequest, c: Candidate): CustomCall => {
  const format = JSON_ONLY.test(c.model) ? "json" : "verbose_json"
  const fields: Array<readonly [string, string]> = [
    ["model", c.model],
    ["response_format", format]
  ]
  if (r.task === "transcribe" && r.language !== undefined) fields.push(["language", r.language])
  if (r.prompt !== undefined) fields.push(["prompt", r.prompt])
  if (r.temperature !== undefined) fields.push(["temperature", String(r.temperature)])
  if (format === "verbose_json") for (const g of r.granularities) fields.push(["timestamp_granularities[]", g])
  return { path: r.task === "transcribe" ? "/audio/transcriptions" : "/audio/translations", bytes: formWith(r, fields) }
}

const openAiTranscript = (bytes: Buffer): { transcript: Transcript; usage: Partial<Usage> | undefined } | undefined => {
  const answer = parseJson(bytes) as any
  // A server that answers plain text whatever was asked: that is the transcript.
  if (answer === undefined) {
    const text = bytes.toString("utf8").trim()
    return text.startsWith("{") || text.startsWith("<") ? undefined : { transcript: { text, language: null }, usage: undefined }
  }
  const text = str(answer?.text)
  if (text === undefined) return undefined
  const segments = Array.isArray(answer.segments)
    ? answer.segments
        .filter((s: any) => num(s?.start) !== undefined && num(s?.end) !== undefined && typeof s?.text === "string")
        .map((s: any, i: number): Segment => ({ ...s, id: num(s.id) ?? i, start: s.start, end: s.end, text: s.text }))
    : undefined
  const words = Array.isArray(answer.words)
    ? answer.words
        .filter((w: any) => typeof w?.word === "string" && num(w?.start) !== undefined && num(w?.end) !== undefined)
        .map((w: any): Word => ({ word: w.word, start: w.start, end: w.end }))
    : undefined
  const u = answer.usage
  const tokens =
    u?.type === "tokens" || num(u?.input_tokens) !== undefined
      ? { inputTokens: num(u.input_tokens) ?? 0, outputTokens: num(u.output_tokens) ?? 0 }
      : undefined
  return {
    transcript: {
      text,
      language: str(answer.language) ?? null,
      ...(segments ? { segments } : {}),
      ...(words ? { words } : {}),
      ...(tokens ? { usage: u } : {})
    },
    usage: tokens
  }
}

// ---------------------------------------------------------------- Deepgram

const deepgramCall = (r: TranscriptionRequest, c: Candidate): CustomCall => ({
  path: `/v1/listen?model=${encodeComponent(c.model)}&smart_format=true&punctuate=true&${r.language !== undefined ? `language=${encodeComponent(r.language)}` : "detect_language=true"}`,
  bytes: uploadBody(r.file, contentTypeOf(r))
})

const deepgramTranscript = (bytes: Buffer): Transcript | undefined => {
  const channel = (parseJson(bytes) as any)?.results?.channels?.[0]
  const best = channel?.alternatives?.[0]
  const text = str(best?.transcript)
  if (text === undefined) return undefined
  const words: Array<Word> = Array.isArray(best.words)
    ? best.words
        .filter((w: any) => num(w?.start) !== undefined && num(w?.end) !== undefined && typeof (w?.punctuated_word ?? w?.word) === "string")
        .map((w: any) => ({ word: w.punctuated_word ?? w.word, start: w.start, end: w.end }))
    : []
  return { text, language: str(channel.detected_language) ?? null, words }
}

// ---------------------------------------------------------------- ElevenLabs

const elevenLabsCall = (r: TranscriptionRequest, c: Candidate): CustomCall => {
  const fields: Array<readonly [string, string]> = [
    ["model_id", c.model],
    ["timestamps_granularity", "word"]
  ]
  if (r.language !== undefined) fields.push(["language_code", r.language])
  return { path: "/v1/speech-to-text", bytes: formWith(r, fields) }
}

const elevenLabsTranscript = (bytes: Buffer): Transcript | undefined => {
  const answer = parseJson(bytes) as any
  const text = str(answer?.text)
  if (text === undefined) return undefined
  const words: Array<Word> = Array.isArray(answer.words)
    ? answer.words
        .filter(
          (w: any) =>
            (w?.type === undefined || w.type === "word") &&
            typeof w?.text === "string" &&
            num(w?.start) !== undefined &&
            num(w?.end) !== undefined
        )
        .map((w: any) => ({ word: w.text, start: w.start, end: w.end }))
    : []
  return { text, language: str(answer.language_code) ?? null, words }
}

// ---------------------------------------------------------------- Gemini

/** What Gemini is asked: the transcript (or English translation) and the spoken language, as JSON. */
const geminiInstruction = (r: TranscriptionRequest): string =>
  [
    r.task === "transcribe"
      ? "Transcribe this audio verbatim, in the language it is spoken in."
      : "Translate the speech in this audio into English.",
    r.language !== undefined && r.task === "transcribe" ? `The audio is in the language with ISO-639-1 code "${r.language}".` : "",
    r.prompt !== undefined ? `Context for the transcription (spellings, names, style): ${r.prompt}` : "",
    `Answer with JSON: "text" is the ${r.task === "transcribe" ? "transcript" : "English translation"} only, "language" the ISO-639-1 code of the spoken language.`
  ]
    .filter((s) => s !== "")
    .join("\n")

/** The audio's type as Gemini names it (its list says `audio/mp3`). */
const geminiMime = (r: TranscriptionRequest): string => {
  const type = r.audio.mimeType === "application/octet-stream" ? contentTypeOf(r) : r.audio.mimeType
  return type === "audio/mpeg" ? "audio/mp3" : type
}

const geminiCall = (r: TranscriptionRequest, c: Candidate, data: Buffer): CustomCall => ({
  path: `/v1beta/models/${encodeComponent(c.model)}:generateContent`,
  json: {
    contents: [
      { role: "user", parts: [{ text: geminiInstruction(r) }, { inlineData: { mimeType: geminiMime(r), data: data.toString("base64") } }] }
    ],
    generationConfig: {
      responseMimeType: "application/json",
      responseSchema: { type: "OBJECT", properties: { text: { type: "STRING" }, language: { type: "STRING" } }, required: ["text"] },
      ...(r.temperature !== undefined ? { temperature: r.temperature } : {})
    }
  }
})

const geminiTranscript = (bytes: Buffer): { transcript: Transcript; usage: Partial<Usage> | undefined } | undefined => {
  const answer = parseJson(bytes) as any
  const parts: ReadonlyArray<any> = Array.isArray(answer?.candidates?.[0]?.content?.parts) ? answer.candidates[0].content.parts : []
  const texts = parts.filter((p) => typeof p?.text === "string" && p.thought !== true).map((p) => p.text as string)
  if (texts.length === 0) return undefined
  const raw = texts.join("")
  const asked = parseJson(Buffer.from(raw, "utf8")) as any
  const meta = answer.usageMetadata
  const usage =
    num(meta?.promptTokenCount) !== undefined
      ? { inputTokens: meta.promptTokenCount, outputTokens: num(meta.candidatesTokenCount) ?? 0 }
      : undefined
  const transcript: Transcript =
    typeof asked?.text === "string"
      ? { text: asked.text.trim(), language: str(asked.language) ?? null }
      : { text: raw.trim(), language: null }
  return { transcript, usage }
}

// ---------------------------------------------------------------- the try

/** One transcription (or translation) try against one candidate, by its family. */
export const tryTranscription =
  (inference: InferenceShape, accounting: AccountingShape) =>
  (r: TranscriptionRequest, c: Candidate): Effect.Effect<Transcribed, AttemptFailed> => {
    const family = audioFamily(c.connection)
    if (family === undefined) return unable(`${c.connection.name} (${c.connection.provider.id}) has no speech-to-text API`, "model")
    if (r.task === "translate" && (family === "deepgram" || family === "elevenlabs")) {
      return unable(
        `${FAMILY_NAMES[family]} (${c.connection.name}) offers no translation; use an OpenAI-compatible or Gemini model`,
        "model"
      )
    }
    return Effect.gen(function* () {
      // Gemini takes the audio inline (base64 in JSON): read whole for it only; the others stream it from disk.
      const call =
        family === "openai"
          ? openAiCall(r, c)
          : family === "deepgram"
            ? deepgramCall(r, c)
            : family === "elevenlabs"
              ? elevenLabsCall(r, c)
              : geminiCall(r, c, yield* r.bytes)
      const res = yield* sendMedia(inference, r, c, call)
      const bytes = yield* mediaBytes(inference, r, c.connection, res)
      const read =
        family === "openai"
          ? openAiTranscript(bytes)
          : family === "gemini"
            ? geminiTranscript(bytes)
            : (() => {
                const t = family === "deepgram" ? deepgramTranscript(bytes) : elevenLabsTranscript(bytes)
                return t ? { transcript: t, usage: undefined } : undefined
              })()
      if (!read) return yield* Effect.fail(badAnswer(r, c.connection, "answered no transcript"))
      return {
        status: 200,
        usage: read.usage,
        ttftMs: null,
        error: null,
        headers: headerValue(res.headers),
        units: chargedUnits(accounting, c, read.usage, { seconds: r.audio.duration }),
        transcript: read.transcript
      } satisfies Transcribed
    })
  }
