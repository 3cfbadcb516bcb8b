/**
 * The contract between the compression engines, the wire-format walker and the Compression
 * service (docs/compression.md). Engines are pure functions over one piece of text at a time:
 * the walker (walk.ts) finds the pieces in a body of any wire format and puts the results back,
 * the service decides which engines run with which settings.
 */
import { ENGINE_IDS, type EngineId } from "../../domain/context.js"

export { ENGINE_IDS, type EngineId }

/** Where a piece of text sits in the request. */
export interface Segment {
  /** Who wrote it: system prompt, user turn, assistant turn, or a tool's result sent back. */
  readonly role: "system" | "user" | "assistant" | "tool"
  /** `tool-result`: the output of a tool or command the client ran; `prose`: anything else. */
  readonly kind: "prose" | "tool-result"
  /** The tool's name, when the format says it (function name, tool_use name). */
  readonly toolName?: string
  /** The command line the tool ran, when the tool call's arguments say it (`command`, `cmd`, `args`). */
  readonly command?: string
  /** Index of the message/turn in the conversation (0-based), and how many there are. */
  readonly turn: number
  readonly turns: number
}

/** What an engine may use besides the text: a place to keep a raw tool output (rtk's marker names the id). */
export interface EngineContext {
  /** Keeps `text` for later retrieval (GET /api/context/rtk/raw-output/{id}); answers its id. */
  readonly keepRaw: (text: string) => string
}

/**
 * One text engine: `apply` answers the new text (the same string when it leaves it alone). Must
 * be deterministic (same text, segment and config: same output), so a conversation prefix
 * compresses the same way on every turn and upstream prompt caches still hit.
 */
export interface TextEngine<C> {
  readonly id: EngineId
  readonly description: string
  /** Which segments it looks at. */
  readonly applies: (segment: Segment) => boolean
  readonly apply: (text: string, segment: Segment, config: C, context: EngineContext) => string
}
