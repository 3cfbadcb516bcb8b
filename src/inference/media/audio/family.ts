/**
 * Which audio API a connection speaks: the media-only providers by their id, Gemini by its wire
 * format, and every OpenAI-format connection (OpenAI, Groq, Mistral, any OpenAI-compatible server)
 * as OpenAI's `/audio/*` endpoints. Anthropic and Ollama connections have no audio API.
 */
import * as Effect from "effect/Effect"
import type { AccountingShape } from "../../../services/accounting/Accounting.js"
import type { MediaUnits } from "../../../services/accounting/cost.js"
import type { Usage } from "../../../domain/canonical.js"
import type { Candidate } from "../../../services/routing/types.js"
import { openAiChat } from "../../../upstream/formats/openai-chat.js"
import type { Connection } from "../../../upstream/providers/Connections.js"
import { attemptFailed, type AttemptFailed } from "../../../kernel/attempts.js"
import { clientError } from "../../../kernel/errors.js"

export type AudioFamily = "openai" | "elevenlabs" | "deepgram" | "gemini"

export const FAMILY_NAMES: Readonly<Record<AudioFamily, string>> = {
  openai: "OpenAI-compatible",
  elevenlabs: "ElevenLabs",
  deepgram: "Deepgram",
  gemini: "Gemini"
}

export const audioFamily = (c: Connection): AudioFamily | undefined =>
  c.provider.id === "elevenlabs"
    ? "elevenlabs"
    : c.provider.id === "deepgram"
      ? "deepgram"
      : c.format === "gemini"
        ? "gemini"
        : c.format === "openai-chat" || c.format === "openai-responses"
          ? "openai"
          : undefined

/**
 * This candidate cannot do what was asked (a format its family lacks, translation on a family
 * without it): passed over without a verdict, so a combo's next target may answer; alone, the
 * client gets this 400 naming the field.
 */
export const unable = (message: string, param: string): Effect.Effect<never, AttemptFailed> =>
  Effect.fail(
    attemptFailed(
      clientError(openAiChat, { status: 400, kind: "invalid_request", message, code: "unsupported_value", param }),
      undefined,
      true
    )
  )

/**
 * What an answer is charged by, so nothing is charged twice: the tokens the upstream reported when
 * the model has token prices (Gemini, gpt-4o-transcribe), else its units (characters of input,
 * seconds of audio).
 */
export const chargedUnits = (
  accounting: AccountingShape,
  c: Candidate,
  usage: Partial<Usage> | undefined,
  units: MediaUnits
): MediaUnits => (usage !== undefined && accounting.mediaCost(c.connection.provider.id, c.model, usage, {}) > 0 ? {} : units)
