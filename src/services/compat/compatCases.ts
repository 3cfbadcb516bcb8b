/**
 * The recorded client requests the compatibility matrix replays (cases.generated.ts, from
 * test/fixtures/clients): each read once, its answer capped at OUTPUT_CAP tokens, aimed at a model,
 * and what its client needs of the answer.
 */
import type { FormatId } from "../../domain/canonical.js"
import { checkAnswer, schemaEngines } from "../../kernel/schemaCheck.js"
import { requestedSchema } from "../../upstream/formats/structured.js"
import { pathKind } from "../inspector/detect.js"
import { answerOf } from "../shadow/compare.js"
import { answeredStreamed, type CallResult, readAnswer, retarget } from "../shadow/exchange.js"

/** One recorded client request (scripts/compat-cases.mjs). */
export interface Case {
  readonly id: string
  readonly client: string
  readonly capability: string
  /** What its answer must show: any answer, text, a tool call, JSON valid against the request's schema. */
  readonly check: "answer" | "text" | "tool_call" | "schema"
  readonly source: string
  readonly path: string
  readonly query: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Readonly<Record<string, unknown>>
  readonly stream: boolean
}

let loaded: Promise<ReadonlyArray<Case>> | undefined
/** The cases, read once on first use (about 350 KiB: the agents' requests carry their whole system prompts and tools). */
export const loadCases = (): Promise<ReadonlyArray<Case>> =>
  (loaded ??= import("./cases.generated.js").then((m) => JSON.parse(m.CASES_JSON) as ReadonlyArray<Case>))

/** The most output tokens a case's answer may use (beyond a thinking budget). */
const OUTPUT_CAP = 1024

const formatOf = (c: Case): FormatId => pathKind(c.path)?.format ?? "openai-chat"

const min = (v: unknown, cap: number) => (typeof v === "number" && v > 0 ? Math.min(v, cap) : cap)

/** The case's body with its answer capped at OUTPUT_CAP tokens in its format's own field, and that cap. */
export const capped = (c: Case): { readonly body: Record<string, unknown>; readonly maxOutputTokens: number } => {
  const body: Record<string, unknown> = { ...c.body }
  switch (formatOf(c)) {
    case "openai-chat": {
      const field = body["max_completion_tokens"] !== undefined ? "max_completion_tokens" : "max_tokens"
      body[field] = min(body[field], OUTPUT_CAP)
      return { body, maxOutputTokens: body[field] as number }
    }
    case "openai-responses":
      body["max_output_tokens"] = min(body["max_output_tokens"], OUTPUT_CAP)
      return { body, maxOutputTokens: body["max_output_tokens"] as number }
    case "anthropic": {
      // A thinking budget is capped too (1024 is Anthropic's least), the answer after it.
      const thinking = body["thinking"] as { type?: string; budget_tokens?: number } | undefined
      const budget = thinking?.type === "enabled" ? min(thinking.budget_tokens, OUTPUT_CAP) : 0
      if (budget > 0) body["thinking"] = { ...thinking, budget_tokens: budget }
      body["max_tokens"] = min(body["max_tokens"], OUTPUT_CAP + budget)
      return { body, maxOutputTokens: body["max_tokens"] as number }
    }
    case "gemini": {
      const config = { ...(body["generationConfig"] as Record<string, unknown> | undefined) }
      config["maxOutputTokens"] = min(config["maxOutputTokens"], OUTPUT_CAP)
      body["generationConfig"] = config
      return { body, maxOutputTokens: config["maxOutputTokens"] as number }
    }
    case "ollama": {
      const options = { ...(body["options"] as Record<string, unknown> | undefined) }
      options["num_predict"] = min(options["num_predict"], OUTPUT_CAP)
      body["options"] = options
      return { body, maxOutputTokens: options["num_predict"] as number }
    }
  }
}

/** Tokens a request carries, estimated from its size (about 4 characters a token). */
export const inputTokensOf = (body: unknown): number => Math.ceil(JSON.stringify(body).length / 4)

/** The case's request, its answer capped, aimed at `model`: its path and body. */
export const targetOf = (c: Case, model: string) => {
  const { body } = capped(c)
  return retarget({ requestId: "", scope: "", format: formatOf(c), path: c.path, query: c.query, body, stream: c.stream }, model)
}

/** Whether an answer is what the case's client needs, and why not. */
export const verdict = async (
  c: Case,
  body: Record<string, unknown>,
  res: CallResult
): Promise<{ readonly pass: boolean; readonly reason: string | null }> => {
  if (res.status !== 200) {
    let message = res.text.slice(0, 300)
    try {
      const e = JSON.parse(res.text) as { error?: { message?: string } | string; message?: string }
      message = (typeof e.error === "string" ? e.error : e.error?.message) ?? e.message ?? message
    } catch {
      // Not JSON: its first characters.
    }
    return { pass: false, reason: `status ${res.status}: ${message}` }
  }
  const format = formatOf(c)
  const streamed = answeredStreamed(c.stream, res)
  if (c.stream && !streamed)
    return { pass: false, reason: `a streaming request was answered whole (${res.contentType || "no content type"})` }
  let answer: ReturnType<typeof answerOf>
  try {
    answer = answerOf(readAnswer(format, res.text, streamed))
  } catch (e) {
    return { pass: false, reason: `the answer could not be read as ${c.client} reads it: ${(e as Error).message}` }
  }
  switch (c.check) {
    case "answer":
      return answer.text.trim() !== "" || answer.tools.length > 0
        ? { pass: true, reason: null }
        : { pass: false, reason: "the answer is empty" }
    case "text":
      return answer.text.trim() !== "" ? { pass: true, reason: null } : { pass: false, reason: "the answer has no text" }
    case "tool_call":
      return answer.tools.length > 0 ? { pass: true, reason: null } : { pass: false, reason: "no tool call: the request asks for one" }
    case "schema": {
      const schema = requestedSchema(format, body)
      if (!schema) return { pass: false, reason: "the request names no schema" }
      const checked = checkAnswer(await schemaEngines(), schema, answer.text)
      if (checked === undefined) return { pass: false, reason: "the schema could not be compiled" }
      return checked.valid
        ? { pass: true, reason: null }
        : { pass: false, reason: `the answer does not match the schema: ${checked.errors.slice(0, 3).join("; ")}` }
    }
  }
}
