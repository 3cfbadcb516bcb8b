/**
 * The playground's shapes (`/api/playground/*`, spec document 3, "Playground backend";
 * docs/playground.md): presets and prompt improvement. The dashboard, the API docs and the skills
 * read these same schemas.
 */
import * as Schema from "effect/Schema"
import * as ParseResult from "effect/ParseResult"
import { describeIssues, strict } from "./parse.js"

/** The 10 playground endpoints. */
export const PLAYGROUND_ENDPOINTS = [
  "chat-completions",
  "completions",
  "embeddings",
  "images",
  "audio",
  "speech",
  "transcriptions",
  "moderations",
  "rerank",
  "search"
] as const
export const PlaygroundEndpoint = Schema.Literal(...PLAYGROUND_ENDPOINTS)

const range = (name: string, min: number, max: number) =>
  Schema.Number.pipe(
    Schema.filter((n) => (Number.isFinite(n) && n >= min && n <= max ? true : `${name} must be a number from ${min} to ${max}`))
  )
const whole = (name: string, min: number, max: number) =>
  Schema.Number.pipe(
    Schema.filter((n) => (Number.isInteger(n) && n >= min && n <= max ? true : `${name} must be a whole number from ${min} to ${max}`))
  )

/** What `params_json` holds: the sampling parameters, each range-checked; nothing else. */
export const PresetParams = Schema.Struct({
  temperature: Schema.optional(range("temperature", 0, 2)),
  max_tokens: Schema.optional(whole("max_tokens", 1, 1_000_000)),
  top_p: Schema.optional(range("top_p", 0, 1)),
  presence_penalty: Schema.optional(range("presence_penalty", -2, 2)),
  frequency_penalty: Schema.optional(range("frequency_penalty", -2, 2)),
  seed: Schema.optional(whole("seed", Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)),
  stop: Schema.optional(
    Schema.Union(Schema.String, Schema.Array(Schema.String)).pipe(
      Schema.filter((v) =>
        typeof v === "string"
          ? v.length <= 200 || "stop must be at most 200 characters"
          : v.length > 4
            ? "stop takes at most 4 sequences"
            : v.every((x) => x.length <= 200) || "stop must be at most 200 characters each"
      )
    )
  )
}).annotations(strict)
export type PresetParams = typeof PresetParams.Type

/** `params_json`: a string holding a JSON object of PresetParams. */
export const ParamsJson = Schema.String.pipe(
  Schema.maxLength(10_000),
  Schema.filter((text) => {
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch (e) {
      return `params_json is not JSON: ${(e as Error).message}`
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) return "params_json must hold a JSON object"
    const decoded = Schema.decodeUnknownEither(PresetParams, { errors: "all", onExcessProperty: "error" })(value)
    if (decoded._tag === "Right") return true
    return `params_json (temperature, max_tokens, top_p, presence_penalty, frequency_penalty, seed, stop): ${describeIssues(ParseResult.ArrayFormatter.formatErrorSync(decoded.left))}`
  })
)

const PresetName = Schema.Trim.pipe(Schema.minLength(1, { message: () => "name must not be empty" }), Schema.maxLength(200))
const Model = Schema.String.pipe(Schema.maxLength(300))
const System = Schema.String.pipe(Schema.maxLength(100_000))

export const Preset = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  endpoint: PlaygroundEndpoint,
  model: Schema.String,
  system: Schema.String,
  params_json: Schema.String,
  created_at: Schema.String
})
export type Preset = typeof Preset.Type

export const PresetList = Schema.Struct({ presets: Schema.Array(Preset) })

export const CreatePreset = Schema.Struct({
  name: PresetName,
  endpoint: PlaygroundEndpoint,
  model: Schema.optional(Model),
  system: Schema.optional(System),
  params_json: Schema.optional(ParamsJson)
}).annotations(strict)

/** A partial update: the fields given replace the stored ones. */
export const UpdatePreset = Schema.Struct({
  name: Schema.optional(PresetName),
  endpoint: Schema.optional(PlaygroundEndpoint),
  model: Schema.optional(Model),
  system: Schema.optional(System),
  params_json: Schema.optional(ParamsJson)
}).annotations(strict)

export const PROMPT_TONES = ["neutral", "concise", "detailed", "formal", "friendly", "precise"] as const

export const ImprovePrompt = Schema.Struct({
  system: Schema.optional(System),
  prompt: Schema.String.pipe(Schema.minLength(1, { message: () => "prompt must not be empty" }), Schema.maxLength(100_000)),
  model: Schema.String.pipe(Schema.minLength(1, { message: () => "model must not be empty" }), Schema.maxLength(300)),
  tone: Schema.optional(Schema.Literal(...PROMPT_TONES))
}).annotations(strict)
export type ImprovePrompt = typeof ImprovePrompt.Type

export const ImprovedPrompt = Schema.Struct({
  improvedSystem: Schema.optional(Schema.String),
  improvedPrompt: Schema.optional(Schema.String),
  tokensIn: Schema.Number,
  tokensOut: Schema.Number
})
export type ImprovedPrompt = typeof ImprovedPrompt.Type
