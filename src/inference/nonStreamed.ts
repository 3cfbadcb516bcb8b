/**
 * Whether a non-streamed request is asked of its upstream whole (cheaper) or as a stream collected: whole only when the answer is
 * short for this upstream, since a whole ask is bounded by the headers timeout (docs/formats.md, "Non-streamed answers from streams").
 */
import type { CanonicalRequest } from "../domain/canonical.js"
import type { ModelSpec } from "../domain/catalog/modelSpec.js"
import type { OutputPace } from "../services/routing/RoutingMemory.js"

export type NonStreamedMode = "auto" | "stream" | "whole"

export interface WholeAskInput {
  readonly mode: NonStreamedMode | undefined
  /** The request, decoded (its output cap and reasoning). */
  readonly request: Pick<CanonicalRequest, "maxTokens" | "reasoning"> | undefined
  /** The catalog's model, when it knows it. */
  readonly spec: ModelSpec | undefined
  /** What this candidate's answers showed of its speed, when it answered before. */
  readonly pace: OutputPace | undefined
  /** The headers timeout a whole answer waits under (the connection's, else the gateway's). */
  readonly headersTimeoutMs: number
}

/**
 * Whether to ask for the whole answer: `whole`, or `auto` when (1) the request does not ask for
 * reasoning and the model is not a reasoning one (they pause before answering, for as long as
 * they think), (2) the output cap is known (`max_tokens`, else the catalog's output limit, else
 * the longest answer this candidate gave) and (3) at the pace this candidate was seen to produce,
 * that many tokens take at most half the headers timeout. Before any pace is known: a stream.
 */
export const asksWhole = ({ mode, request, spec, pace, headersTimeoutMs }: WholeAskInput): boolean => {
  if (mode === "whole") return true
  if (mode === "stream" || pace === undefined) return false
  if (spec?.capabilities.reasoning === true) return false
  const reasoning = request?.reasoning
  if (reasoning !== undefined && reasoning.enabled) return false
  const cap = request?.maxTokens ?? (spec !== undefined && spec.maxOutput > 0 ? spec.maxOutput : pace.longestOutput)
  return (cap * 1000) / pace.tokensPerSecond <= headersTimeoutMs / 2
}
