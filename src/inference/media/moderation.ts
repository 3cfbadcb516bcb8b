/**
 * `POST /v1/moderations` in OpenAI's shape, from OpenAI-compatible servers (relayed) and Mistral (translated, text only); it costs
 * nothing at the gateway (docs/media.md, "Moderation").
 */
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import type { AccountingShape } from "../../services/accounting/Accounting.js"
import { num, obj, str, tryJson } from "../../upstream/formats/common.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import type { AttemptFailed } from "../../kernel/attempts.js"
import type { InferenceShape } from "../call.js"
import { badRequest, type InferenceError } from "../../kernel/errors.js"
import type { AttemptRequest } from "../fallback.js"
import { type HttpRequestContext, sendJson } from "../io.js"
import type { Candidate } from "../../services/routing/types.js"
import { badAnswer, does, headerValue, mediaBytes, type MediaOutcome, runMedia, sendMedia } from "./run.js"

/** OpenAI's default moderation model, used when the request names none (as OpenAI does). */
export const DEFAULT_MODERATION_MODEL = "omni-moderation-latest"

/** A Mistral score at or above this flags its category (besides Mistral's own booleans). */
export const MODERATION_THRESHOLD = 0.5

/** OpenAI's categories: every translated result carries all of them. */
export const OPENAI_CATEGORIES = [
  "harassment",
  "harassment/threatening",
  "hate",
  "hate/threatening",
  "illicit",
  "illicit/violent",
  "self-harm",
  "self-harm/instructions",
  "self-harm/intent",
  "sexual",
  "sexual/minors",
  "violence",
  "violence/graphic"
] as const

/**
 * Mistral's categories that have an OpenAI counterpart. `dangerous` and `criminal` are the
 * split of `dangerous_and_criminal_content` announced for mistral-moderation-2603 (exact keys
 * unconfirmed). The others (`health`, `financial`, `law`, `pii`, `jailbreaking`, anything new)
 * are kept under their own names.
 */
export const MISTRAL_TO_OPENAI: Readonly<Record<string, (typeof OPENAI_CATEGORIES)[number]>> = {
  sexual: "sexual",
  hate_and_discrimination: "hate",
  violence_and_threats: "violence",
  dangerous_and_criminal_content: "illicit",
  dangerous: "illicit",
  criminal: "illicit",
  selfharm: "self-harm"
}

/** Mistral's advice categories (unqualified health, financial, legal advice): reported, never `flagged`. */
export const ADVICE_CATEGORIES: ReadonlySet<string> = new Set(["health", "financial", "law"])

type Part = { readonly type: "text"; readonly text: string } | { readonly type: "image_url"; readonly url: string }

/** The input: texts (one result each) or one multimodal input (one result). */
export type ModerationInput =
  | { readonly kind: "texts"; readonly texts: ReadonlyArray<string> }
  | { readonly kind: "parts"; readonly parts: ReadonlyArray<Part> }

export interface ModerationAsk {
  readonly model: string
  readonly input: ModerationInput
  readonly images: boolean
}

const fail = (message: string, param: string): Effect.Effect<never, InferenceError> => Effect.fail(badRequest(message, param))

const INPUT_SHAPE = 'a string, an array of strings, or an array of {type: "text", text} and {type: "image_url", image_url: {url}} parts'

/** The request body, checked: a 400 names the first field that is wrong. */
export const parseModeration = (body: Record<string, unknown>): Effect.Effect<ModerationAsk, InferenceError> => {
  const m = body["model"]
  if (m !== undefined && m !== null && (typeof m !== "string" || m === "")) return fail("model must be a non-empty string", "model")
  const model = typeof m === "string" ? m : DEFAULT_MODERATION_MODEL
  const input = body["input"]
  if (input === undefined || input === null) return fail(`input is required: ${INPUT_SHAPE}`, "input")
  if (typeof input === "string") return Effect.succeed({ model, input: { kind: "texts", texts: [input] }, images: false })
  if (!Array.isArray(input) || input.length === 0) return fail(`input must be ${INPUT_SHAPE} (non-empty)`, "input")
  if (input.every((i) => typeof i === "string"))
    return Effect.succeed({ model, input: { kind: "texts", texts: input as Array<string> }, images: false })
  const parts: Array<Part> = []
  for (let i = 0; i < input.length; i++) {
    const p = obj(input[i])
    const text = str(p?.["text"])
    const url = str(obj(p?.["image_url"])?.["url"])
    if (p?.["type"] === "text" && text !== undefined) parts.push({ type: "text", text })
    else if (p?.["type"] === "image_url" && url) parts.push({ type: "image_url", url })
    else
      return fail(
        `input[${i}] must be {type: "text", text: string} or {type: "image_url", image_url: {url: string}} (strings and parts cannot be mixed)`,
        `input[${i}]`
      )
  }
  return Effect.succeed({ model, input: { kind: "parts", parts }, images: parts.some((p) => p.type === "image_url") })
}

export type ModerationFamily = "openai" | "mistral"

export const moderationFamily = (c: Candidate): ModerationFamily | undefined => {
  switch (c.connection.provider.id) {
    case "openai":
    case "openai-compatible":
      return "openai"
    case "mistral":
      return "mistral"
    default:
      return undefined
  }
}

const moderates = does("moderation")
/** A candidate for this input: a family the gateway speaks, a moderation model, and images only where the family reads them. */
const ableFor =
  (ask: ModerationAsk) =>
  (c: Candidate): boolean => {
    const family = moderationFamily(c)
    return family !== undefined && moderates(c) && !(ask.images && family === "mistral")
  }

interface ModerationRequest extends AttemptRequest {
  readonly ask: ModerationAsk
  readonly body: Record<string, unknown>
}

interface Moderated extends MediaOutcome {
  readonly answer: Record<string, unknown>
}

/** Mistral's input: one string per text, a multimodal input's texts joined into one. */
const mistralInput = (input: ModerationInput): Array<string> =>
  input.kind === "texts" ? [...input.texts] : [input.parts.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("\n")]

/** A category name from the upstream that may be used as a key (no prototype tricks, no control characters). */
const safeKey = (k: string): boolean => /^[A-Za-z0-9_/ -]{1,64}$/.test(k) && k !== "__proto__"

/** One Mistral result in OpenAI's shape (see MISTRAL_TO_OPENAI, ADVICE_CATEGORIES, MODERATION_THRESHOLD). */
export const fromMistralResult = (result: unknown) => {
  const r = obj(result) ?? {}
  const given = obj(r["categories"]) ?? {}
  const scored = obj(r["category_scores"]) ?? {}
  const categories: Record<string, boolean> = {}
  const scores: Record<string, number> = {}
  for (const c of OPENAI_CATEGORIES) {
    categories[c] = false
    scores[c] = 0
  }
  for (const key of new Set([...Object.keys(given), ...Object.keys(scored)])) {
    if (!safeKey(key)) continue
    const score = num(scored[key]) ?? 0
    const name = MISTRAL_TO_OPENAI[key] ?? key
    categories[name] = (categories[name] ?? false) || given[key] === true || score >= MODERATION_THRESHOLD
    scores[name] = Math.max(scores[name] ?? 0, score)
  }
  const applied: Record<string, Array<string>> = {}
  for (const c of Object.keys(categories)) applied[c] = ["text"]
  return {
    flagged: Object.entries(categories).some(([k, v]) => v && !ADVICE_CATEGORIES.has(k)),
    categories,
    category_scores: scores,
    category_applied_input_types: applied
  }
}

/** One try against one candidate: the OpenAI body relayed, or Mistral's asked and translated. */
const tryModeration =
  (inference: InferenceShape) =>
  (request: ModerationRequest, c: Candidate): Effect.Effect<Moderated, AttemptFailed> =>
    Effect.gen(function* () {
      const family = moderationFamily(c)!
      const { ask } = request
      const json = family === "openai" ? { ...request.body, model: c.model } : { model: c.model, input: mistralInput(ask.input) }
      const res = yield* sendMedia(inference, request, c, { path: "/moderations", json })
      const answer = obj(tryJson((yield* mediaBytes(inference, request, c.connection, res)).toString("utf8")))
      const results = answer?.["results"]
      const expected = ask.input.kind === "texts" ? ask.input.texts.length : 1
      if (!answer || !Array.isArray(results) || (family === "mistral" && results.length !== expected)) {
        return yield* Effect.fail(badAnswer(request, c.connection, `the moderation answer has no results for the ${expected} input(s)`))
      }
      const out =
        family === "openai"
          ? answer
          : {
              id: str(answer["id"]) ?? `modr-${crypto.randomUUID().replace(/-/g, "")}`,
              model: str(answer["model"]) ?? c.model,
              results: results.map(fromMistralResult)
            }
      // No usage and no units: moderation is reported at no cost.
      return { status: 200, usage: undefined, ttftMs: null, error: null, headers: headerValue(res.headers), answer: out }
    })

/** `POST /v1/moderations`. */
export const moderations =
  (inference: InferenceShape, accounting: AccountingShape) => (ctx: HttpRequestContext, body: Record<string, unknown>) =>
    Effect.gen(function* () {
      const ask = yield* parseModeration(body)
      const { outcome } = yield* runMedia(inference, accounting, {
        ctx,
        client: openAiChat,
        model: ask.model,
        endpoint: "moderations",
        what: ask.images ? "moderation of images" : "moderation",
        able: ableFor(ask),
        request: { ctx, format: openAiChat, model: ask.model, ask, body },
        attempt: tryModeration(inference)
      })
      sendJson(ctx, 200, outcome.answer)
    })
