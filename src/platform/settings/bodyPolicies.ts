import type { Effort, SystemPromptSettings, ThinkingBudgetSettings } from "../../domain/settings.js"
import type { FormatId } from "../../domain/canonical.js"

/**
 * The global system prompt and thinking-budget policy applied to a client's body in its own
 * wire format (docs/operations.md, "Settings"). Pure functions over the JSON body: each answers
 * the new body, or undefined when there is nothing to change. They run as an `onRequest` hook,
 * so a same-format pass-through and a translated request both carry the change.
 */

type Body = Readonly<Record<string, unknown>>

const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
const join = (a: string, b: string) => (a && b ? `${a}\n\n${b}` : a || b)

// ---------------------------------------------------------------- system prompt

/** A system message before (prepend) or right after (append) the leading system/developer messages. */
const intoMessages = (messages: unknown, text: string, position: SystemPromptSettings["position"]): Array<unknown> | undefined => {
  if (!Array.isArray(messages)) return undefined
  const message = { role: "system", content: text }
  if (position === "prepend") return [message, ...messages]
  let i = 0
  while (i < messages.length && (obj(messages[i])?.["role"] === "system" || obj(messages[i])?.["role"] === "developer")) i++
  return [...messages.slice(0, i), message, ...messages.slice(i)]
}

export const withSystemPrompt = (format: FormatId, endpoint: string, body: Body, s: SystemPromptSettings): Body | undefined => {
  const text = s.text
  const before = s.position === "prepend"
  switch (format) {
    case "openai-chat": {
      // Legacy completions (`prompt`) have no system field: left alone.
      const messages = intoMessages(body["messages"], text, s.position)
      return messages ? { ...body, messages } : undefined
    }
    case "ollama": {
      if (endpoint === "api.generate") {
        const own = typeof body["system"] === "string" ? body["system"] : ""
        return { ...body, system: before ? join(text, own) : join(own, text) }
      }
      const messages = intoMessages(body["messages"], text, s.position)
      return messages ? { ...body, messages } : undefined
    }
    case "openai-responses": {
      const own = typeof body["instructions"] === "string" ? body["instructions"] : ""
      return { ...body, instructions: before ? join(text, own) : join(own, text) }
    }
    case "anthropic": {
      const own = body["system"]
      if (Array.isArray(own)) {
        const block = { type: "text", text }
        return { ...body, system: before ? [block, ...own] : [...own, block] }
      }
      const str = typeof own === "string" ? own : ""
      return { ...body, system: before ? join(text, str) : join(str, text) }
    }
    case "gemini": {
      // The REST API takes either spelling; keep the client's.
      const key =
        body["system_instruction"] !== undefined && body["systemInstruction"] === undefined ? "system_instruction" : "systemInstruction"
      const own = obj(body[key])
      const parts = Array.isArray(own?.["parts"]) ? (own!["parts"] as Array<unknown>) : []
      const part = { text }
      return { ...body, [key]: { ...own, parts: before ? [part, ...parts] : [...parts, part] } }
    }
  }
}

// ---------------------------------------------------------------- thinking budget

/** The budget a level stands for, to compare levels with a token cap. */
export const EFFORT_TOKENS: Readonly<Record<Effort, number>> = { none: 0, minimal: 1024, low: 2048, medium: 8192, high: 24576 }
const LEVELS: ReadonlyArray<Effort> = ["none", "minimal", "low", "medium", "high"]

/** The highest level within `max` tokens. */
const levelWithin = (max: number): Effort => {
  let best: Effort = "none"
  for (const l of LEVELS) if (EFFORT_TOKENS[l] <= max) best = l
  return best
}

/** A level lowered to the cap, or undefined when it is within it (or not a level we know). */
const cappedLevel = (level: unknown, max: number): Effort | undefined => {
  if (typeof level !== "string" || !(level in EFFORT_TOKENS)) return undefined
  return EFFORT_TOKENS[level as Effort] > max ? levelWithin(max) : undefined
}

/** Anthropic takes no budget under 1024 tokens: below that, thinking is off. */
const ANTHROPIC_MIN = 1024

export const withThinkingBudget = (format: FormatId, body: Body, t: ThinkingBudgetSettings): Body | undefined => {
  if (t.mode === "passthrough") return undefined
  const force = t.mode === "force"
  const max = t.maxTokens
  switch (format) {
    case "openai-chat": {
      if (force) return { ...body, reasoning_effort: t.effort }
      const lower = cappedLevel(body["reasoning_effort"], max)
      return lower ? { ...body, reasoning_effort: lower } : undefined
    }
    case "openai-responses": {
      const reasoning = obj(body["reasoning"])
      if (force) return { ...body, reasoning: { ...reasoning, effort: t.effort } }
      const lower = cappedLevel(reasoning?.["effort"], max)
      return lower ? { ...body, reasoning: { ...reasoning, effort: lower } } : undefined
    }
    case "ollama": {
      if (force) return { ...body, think: t.effort === "none" ? false : t.effort === "minimal" ? "low" : t.effort }
      const think = body["think"]
      const lower = cappedLevel(think === true ? "medium" : think, max)
      if (!lower) return undefined
      return { ...body, think: lower === "none" ? false : lower === "minimal" ? "low" : lower }
    }
    case "anthropic": {
      const thinking = obj(body["thinking"])
      const maxTokens = typeof body["max_tokens"] === "number" ? body["max_tokens"] : undefined
      if (force) {
        if (t.budgetTokens < ANTHROPIC_MIN) return { ...body, thinking: { type: "disabled" } }
        // max_tokens must exceed the budget: raised when it does not.
        const raised = maxTokens !== undefined && maxTokens <= t.budgetTokens ? { max_tokens: t.budgetTokens + 1024 } : {}
        return { ...body, ...raised, thinking: { type: "enabled", budget_tokens: t.budgetTokens } }
      }
      const budget = thinking?.["budget_tokens"]
      if (thinking?.["type"] !== "enabled" || typeof budget !== "number" || budget <= max) return undefined
      return max < ANTHROPIC_MIN ? { ...body, thinking: { type: "disabled" } } : { ...body, thinking: { ...thinking, budget_tokens: max } }
    }
    case "gemini": {
      const key =
        body["generation_config"] !== undefined && body["generationConfig"] === undefined ? "generation_config" : "generationConfig"
      const config = obj(body[key])
      const tkey =
        config?.["thinking_config"] !== undefined && config?.["thinkingConfig"] === undefined ? "thinking_config" : "thinkingConfig"
      const thinking = obj(config?.[tkey])
      const bkey =
        thinking?.["thinking_budget"] !== undefined && thinking?.["thinkingBudget"] === undefined ? "thinking_budget" : "thinkingBudget"
      const set = (budget: number) => ({ ...body, [key]: { ...config, [tkey]: { ...thinking, [bkey]: budget } } })
      if (force) return set(t.budgetTokens)
      const budget = thinking?.[bkey]
      // -1 is "dynamic": unbounded, so capped too.
      if (typeof budget !== "number" || (budget !== -1 && budget <= max)) return undefined
      return set(max)
    }
  }
}
