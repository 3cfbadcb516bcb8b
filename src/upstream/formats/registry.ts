import { anthropic } from "./anthropic.js"
import type { FormatId } from "../../domain/canonical.js"
import type { WireFormat } from "./format.js"
import { gemini } from "./gemini.js"
import { ollama } from "./ollama.js"
import { openAiChat } from "./openai-chat.js"
import { openAiResponses } from "./openai-responses.js"

export const FORMATS: Readonly<Record<FormatId, WireFormat>> = {
  "openai-chat": openAiChat,
  "openai-responses": openAiResponses,
  anthropic,
  gemini,
  ollama
}
