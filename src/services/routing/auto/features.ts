/**
 * Cheap request features for the auto engine: a token estimate, tool / image / reasoning
 * hints, a task type from keyword rules and a specificity hint. This is a routing estimate,
 * not a token count: it runs on every auto request and must stay O(size of the request).
 */
import type { CanonicalRequest, ContentBlock, Message } from "../../../domain/canonical.js"
import type { RequestFeatures, TaskType } from "../types.js"

/** Tokens charged per image in the estimate (a low-detail image tile). */
export const IMAGE_TOKENS = 85
/** Characters per estimated token. */
export const CHARS_PER_TOKEN = 4
/** Token count at which the length part of specificity saturates. */
export const SPECIFICITY_TOKEN_SCALE = 4000

const jsonLength = (v: unknown): number => {
  if (v === undefined) return 0
  if (typeof v === "string") return v.length
  try {
    return JSON.stringify(v)?.length ?? 0
  } catch {
    return 0
  }
}

const blockChars = (b: ContentBlock): { chars: number; images: number } => {
  switch (b.type) {
    case "text":
      return { chars: b.text.length, images: 0 }
    case "reasoning":
      return { chars: b.text.length, images: 0 }
    case "image":
      return { chars: 0, images: 1 }
    case "tool_use":
      return { chars: jsonLength(b.input), images: 0 }
    case "tool_result": {
      let chars = 0
      let images = 0
      for (const c of b.content) {
        if (c.type === "text") chars += c.text.length
        else images += 1
      }
      return { chars, images }
    }
  }
}

const textOfMessage = (m: Message): string =>
  m.content
    .filter((b): b is Extract<ContentBlock, { type: "text" }> => b.type === "text")
    .map((b) => b.text)
    .join("\n")

/**
 * Task keyword rules, checked in this order; the first that matches wins. Debugging comes
 * first ("fix this bug in my function" is debugging, not coding), then review, planning,
 * documentation and analysis; coding is last of the specific types because code words are
 * everywhere. A fenced code block or defined tools also mean coding. Nothing → chat.
 */
export const TASK_RULES: ReadonlyArray<{ readonly task: Exclude<TaskType, "chat">; readonly patterns: ReadonlyArray<RegExp> }> = [
  {
    task: "debugging",
    patterns: [
      /\b(errors?|exceptions?|stack ?traces?|bugs?|buggy|fix(es|ed|ing)?|tracebacks?|failing|fails|failed|crash(es|ed|ing)?|debug(ging)?|segfault)\b/i
    ]
  },
  // "PR" only in capitals: a lower-case "pr" is too often something else.
  { task: "review", patterns: [/\b(review(s|ing)?|critique|code review|pull request)\b/i, /\bPRs?\b/] },
  { task: "planning", patterns: [/\b(plan(s|ning)?|design(s|ing)?|architecture|roadmap|steps|milestones?)\b/i] },
  { task: "documentation", patterns: [/\b(document(s|ation|ing)?|docs|readme|docstrings?|comments?|jsdoc|changelog)\b/i] },
  { task: "analysis", patterns: [/\b(analy[sz]e|analy[sz]ing|analysis|compare|comparison|evaluate|explain why|data(set)?)\b/i] },
  {
    task: "coding",
    patterns: [
      /\b(code|coding|function|functions|implement(s|ation|ing)?|refactor(ing)?|class(es)?|method|typescript|javascript|python|java|golang|rust|kotlin|swift|ruby|php|sql|regex|bash|script|compile|unit tests?|api)\b/i,
      /c\+\+|c#|```/i
    ]
  }
]

/** The task type of a text (see TASK_RULES for the order); tools without a keyword mean coding. */
export const classifyTask = (text: string, hasTools: boolean): TaskType => {
  for (const rule of TASK_RULES) if (rule.patterns.some((p) => p.test(text))) return rule.task
  return hasTools ? "coding" : "chat"
}

/**
 * specificity = 0.40 × min(1, tokenEstimate / 4000) + 0.25 (tools) + 0.20 (a ``` block in any
 * message) + 0.15 (reasoning asked), clamped to [0, 1].
 */
export const specificityOf = (f: {
  readonly tokenEstimate: number
  readonly hasTools: boolean
  readonly hasCodeBlock: boolean
  readonly wantsReasoning: boolean
}): number => {
  const s =
    0.4 * Math.min(1, Math.max(0, f.tokenEstimate) / SPECIFICITY_TOKEN_SCALE) +
    (f.hasTools ? 0.25 : 0) +
    (f.hasCodeBlock ? 0.2 : 0) +
    (f.wantsReasoning ? 0.15 : 0)
  return Math.min(1, Math.max(0, s))
}

/** The routing features of a request. */
export const requestFeatures = (req: CanonicalRequest, sessionId: string | undefined): RequestFeatures => {
  let chars = 0
  let images = 0
  let toolHistory = false
  let hasCodeBlock = false
  for (const s of req.system) {
    chars += s.text.length
    if (s.text.includes("```")) hasCodeBlock = true
  }
  for (const m of req.messages) {
    for (const b of m.content) {
      const c = blockChars(b)
      chars += c.chars
      images += c.images
      if (b.type === "tool_use" || b.type === "tool_result") toolHistory = true
      else if (b.type === "text" && !hasCodeBlock && b.text.includes("```")) hasCodeBlock = true
    }
  }
  if (req.tools.length > 0) chars += jsonLength(req.tools)
  const tokenEstimate = Math.ceil(chars / CHARS_PER_TOKEN) + IMAGE_TOKENS * images
  const hasTools = req.tools.length > 0 || toolHistory
  const wantsReasoning = req.reasoning?.enabled === true
  let lastUser = ""
  for (let i = req.messages.length - 1; i >= 0; i--) {
    const m = req.messages[i]!
    if (m.role === "user") {
      lastUser = textOfMessage(m)
      break
    }
  }
  return {
    tokenEstimate,
    maxOutputTokens: req.maxTokens,
    hasTools,
    hasImages: images > 0,
    wantsReasoning,
    taskType: classifyTask(lastUser, hasTools),
    specificity: specificityOf({ tokenEstimate, hasTools, hasCodeBlock, wantsReasoning }),
    sessionId
  }
}
