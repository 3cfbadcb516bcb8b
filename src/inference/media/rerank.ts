/**
 * `POST /v1/rerank`: one client shape over four upstream wire shapes. Documents are attached from the request, never asked back
 * (docs/media.md, "Rerank").
 */
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import type { AccountingShape } from "../../services/accounting/Accounting.js"
import { num, obj, str, tryJson } from "../../upstream/formats/common.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import type { InferenceShape } from "../call.js"
import { badRequest, type InferenceError } from "../../kernel/errors.js"
import type { AttemptRequest } from "../fallback.js"
import { type HttpRequestContext, sendJson } from "../io.js"
import type { Candidate } from "../../services/routing/types.js"
import type { CustomCall } from "../../upstream/client/executors.js"
import type { AttemptFailed } from "../../kernel/attempts.js"
import { badAnswer, does, headerValue, mediaBytes, type MediaOutcome, runMedia, sendMedia } from "./run.js"

/** Cohere and Voyage take at most 1000 documents a request; the gateway holds every family to it. */
export const MAX_RERANK_DOCUMENTS = 1000
/** Cohere bills one search unit per query and up to 100 documents (when it does not say). */
export const DOCUMENTS_PER_SEARCH = 100

/** The wire shape a connection's rerank API speaks. */
export type RerankFamily = "cohere" | "jina" | "voyage" | "compatible"

export const rerankFamily = (c: Candidate): RerankFamily | undefined => {
  switch (c.connection.provider.id) {
    case "cohere":
      return "cohere"
    case "jina":
      return "jina"
    case "voyage":
      return "voyage"
    case "together":
    case "openai-compatible":
      return "compatible"
    default:
      return undefined
  }
}

const reranks = does("rerank")
/** A candidate that can rerank: a family the gateway speaks, a model that reranks. */
const able = (c: Candidate): boolean => rerankFamily(c) !== undefined && reranks(c)

/** What the client asked, checked. */
export interface RerankAsk {
  readonly model: string
  readonly query: string
  readonly documents: ReadonlyArray<string>
  readonly topN: number | undefined
  readonly returnDocuments: boolean
}

const fail = (message: string, param: string): Effect.Effect<never, InferenceError> => Effect.fail(badRequest(message, param))

/** The request body, checked field by field: a 400 names the first field that is wrong. */
export const parseRerank = (body: Record<string, unknown>): Effect.Effect<RerankAsk, InferenceError> => {
  const model = str(body["model"])
  if (!model) return fail("model must be a non-empty string", "model")
  const query = body["query"]
  if (typeof query !== "string" || query.trim() === "") return fail("query must be a non-empty string", "query")
  const docs = body["documents"]
  if (!Array.isArray(docs) || docs.length === 0)
    return fail("documents must be a non-empty array of strings (or of objects with a text field)", "documents")
  if (docs.length > MAX_RERANK_DOCUMENTS)
    return fail(`documents may hold at most ${MAX_RERANK_DOCUMENTS} entries (got ${docs.length})`, "documents")
  const documents: Array<string> = []
  for (let i = 0; i < docs.length; i++) {
    const d = docs[i]
    const text = typeof d === "string" ? d : str(obj(d)?.["text"])
    if (text === undefined) return fail(`documents[${i}] must be a string or an object with a string text field`, `documents[${i}]`)
    documents.push(text)
  }
  const top = body["top_n"]
  if (top !== undefined && top !== null && !(typeof top === "number" && Number.isInteger(top) && top >= 1))
    return fail("top_n must be a positive integer", "top_n")
  const ret = body["return_documents"]
  if (ret !== undefined && ret !== null && typeof ret !== "boolean") return fail("return_documents must be a boolean", "return_documents")
  return Effect.succeed({
    model,
    query,
    documents,
    topN: typeof top === "number" ? Math.min(top, documents.length) : undefined,
    returnDocuments: ret === true
  })
}

interface RerankRequest extends AttemptRequest {
  readonly ask: RerankAsk
}

interface Ranked {
  readonly index: number
  readonly relevance_score: number
}

interface Reranked extends MediaOutcome {
  readonly id: string | undefined
  readonly ranked: ReadonlyArray<Ranked>
  readonly searchUnits: number | undefined
  readonly totalTokens: number | undefined
}

/** The upstream call for one family (documents always as strings, never asked back). */
export const rerankCall = (family: RerankFamily, model: string, ask: RerankAsk): CustomCall => {
  const base = { model, query: ask.query, documents: ask.documents }
  switch (family) {
    case "cohere":
      return { path: "/v2/rerank", json: { ...base, ...(ask.topN !== undefined ? { top_n: ask.topN } : {}) } }
    case "voyage":
      return { path: "/v1/rerank", json: { ...base, ...(ask.topN !== undefined ? { top_k: ask.topN } : {}), return_documents: false } }
    case "jina":
      return { path: "/v1/rerank", json: { ...base, ...(ask.topN !== undefined ? { top_n: ask.topN } : {}), return_documents: false } }
    case "compatible":
      return { path: "/rerank", json: { ...base, ...(ask.topN !== undefined ? { top_n: ask.topN } : {}), return_documents: false } }
  }
}

/**
 * An upstream's answer in any of the shapes (`results` or Voyage's `data`; usage as Cohere's
 * billed search units or as tokens), or undefined when it is none of them: an index out of
 * range or a score that is not a number makes the whole answer unusable.
 */
export const readRerank = (
  json: unknown,
  documents: number
): { id: string | undefined; ranked: Array<Ranked>; searchUnits: number | undefined; totalTokens: number | undefined } | undefined => {
  const b = obj(json)
  if (!b) return undefined
  const list = Array.isArray(b["results"]) ? b["results"] : Array.isArray(b["data"]) ? b["data"] : undefined
  if (!list) return undefined
  const ranked: Array<Ranked> = []
  for (const item of list) {
    const index = num(obj(item)?.["index"])
    const score = num(obj(item)?.["relevance_score"])
    if (index === undefined || !Number.isInteger(index) || index < 0 || index >= documents || score === undefined) return undefined
    ranked.push({ index, relevance_score: score })
  }
  const usage = obj(b["usage"])
  const searchUnits = num(obj(obj(b["meta"])?.["billed_units"])?.["search_units"]) ?? num(usage?.["search_units"])
  const totalTokens = num(usage?.["total_tokens"]) ?? num(usage?.["prompt_tokens"])
  return { id: str(b["id"]), ranked, searchUnits, totalTokens }
}

/** One try against one candidate. */
const tryRerank =
  (inference: InferenceShape) =>
  (request: RerankRequest, c: Candidate): Effect.Effect<Reranked, AttemptFailed> =>
    Effect.gen(function* () {
      const { ask } = request
      const res = yield* sendMedia(inference, request, c, rerankCall(rerankFamily(c)!, c.model, ask))
      const bytes = yield* mediaBytes(inference, request, c.connection, res)
      const read = readRerank(tryJson(bytes.toString("utf8")), ask.documents.length)
      if (!read)
        return yield* Effect.fail(badAnswer(request, c.connection, "the rerank answer has no results with an index and a relevance_score"))
      // Priced by tokens where the upstream reports them, else by search units (reported, or one per query and 100 documents).
      const searches =
        read.searchUnits ?? (read.totalTokens === undefined ? Math.ceil(ask.documents.length / DOCUMENTS_PER_SEARCH) : undefined)
      return {
        status: 200,
        usage: read.totalTokens !== undefined ? { inputTokens: read.totalTokens, outputTokens: 0 } : undefined,
        ttftMs: null,
        error: null,
        headers: headerValue(res.headers),
        ...(searches !== undefined ? { units: { searches } } : {}),
        id: read.id,
        ranked: read.ranked,
        searchUnits: searches,
        totalTokens: read.totalTokens
      }
    })

/** The client's answer: most relevant first, at most `top_n`, documents attached when asked. */
export const rerankAnswer = (ask: RerankAsk, model: string, r: Pick<Reranked, "id" | "ranked" | "searchUnits" | "totalTokens">) => {
  const sorted = [...r.ranked].sort((a, b) => b.relevance_score - a.relevance_score)
  return {
    id: r.id ?? `rerank-${crypto.randomUUID()}`,
    model,
    results: sorted.slice(0, ask.topN ?? sorted.length).map((x) => ({
      index: x.index,
      relevance_score: x.relevance_score,
      ...(ask.returnDocuments ? { document: { text: ask.documents[x.index]! } } : {})
    })),
    usage: {
      ...(r.searchUnits !== undefined ? { search_units: r.searchUnits } : {}),
      ...(r.totalTokens !== undefined ? { total_tokens: r.totalTokens } : {})
    }
  }
}

/** `POST /v1/rerank`. */
export const rerank =
  (inference: InferenceShape, accounting: AccountingShape) => (ctx: HttpRequestContext, body: Record<string, unknown>) =>
    Effect.gen(function* () {
      const ask = yield* parseRerank(body)
      const { outcome, candidate } = yield* runMedia(inference, accounting, {
        ctx,
        client: openAiChat,
        model: ask.model,
        endpoint: "rerank",
        what: "rerank",
        able,
        request: { ctx, format: openAiChat, model: ask.model, ask },
        attempt: tryRerank(inference)
      })
      sendJson(ctx, 200, rerankAnswer(ask, candidate.model, outcome))
    })
