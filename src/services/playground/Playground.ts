/**
 * The playground's backend (docs/playground.md): presets, kept in the store's
 * `playground-presets` namespace (SQLite or PostgreSQL through KeyValue; in backups and sync
 * bundles with the rest of the kv table), and prompt improvement, a chat completion of the
 * gateway's own through its router (routing, usage, cost, budgets and guardrails apply) with a
 * meta prompt.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as crypto from "node:crypto"
import { BadGateway, NotFound } from "../../domain/errors.js"
import type { ImprovedPrompt, ImprovePrompt, Preset } from "../../domain/playground.js"
import { OwnRoutes } from "../../kernel/internalCall.js"
import { KeyValue } from "../../platform/store/KeyValue.js"

export const PRESETS_NAMESPACE = "playground-presets"

/** What improve-prompt's chat completion answered: the assistant's text and the usage. */
export interface ChatResult {
  readonly status: number
  readonly text: string | undefined
  readonly error: string | undefined
  readonly tokensIn: number
  readonly tokensOut: number
}

/** A chat completion through the gateway's own routes (bound once the server listens: Playground.ownRoutesLayer). */
export type ChatCaller = (body: Record<string, unknown>, onBehalfOf: string | null) => Promise<ChatResult>

export interface PlaygroundShape {
  readonly list: Effect.Effect<ReadonlyArray<Preset>>
  readonly get: (id: string) => Effect.Effect<Preset, NotFound>
  readonly create: (
    input: Omit<Preset, "id" | "created_at" | "model" | "system" | "params_json"> &
      Partial<Pick<Preset, "model" | "system" | "params_json">>
  ) => Effect.Effect<Preset>
  readonly update: (id: string, patch: Partial<Omit<Preset, "id" | "created_at">>) => Effect.Effect<Preset, NotFound>
  readonly remove: (id: string) => Effect.Effect<void, NotFound>
  /** The improved system prompt and prompt; 502 when the model cannot be reached or answers nothing usable. */
  readonly improve: (input: ImprovePrompt, onBehalfOf: string | null) => Effect.Effect<ImprovedPrompt, BadGateway>
  readonly setCaller: (caller: ChatCaller | undefined) => void
}

const TONES: Record<string, string> = {
  neutral: "Keep the author's tone.",
  concise: "Make it as short as it can be without losing anything the task needs.",
  detailed: "Make it thorough: spell out the context, constraints and the expected output.",
  formal: "Use a formal, professional register.",
  friendly: "Use a warm, friendly register.",
  precise: "Make every instruction unambiguous and testable; name formats, limits and edge cases."
}

/** The meta prompt: the model answers a JSON object with the two improved texts. */
export const metaPrompt = (input: ImprovePrompt): Array<{ role: string; content: string }> => [
  {
    role: "system",
    content: [
      "You improve prompts written for large language models. Rewrite the system prompt and the user prompt you are given so that a model follows them better:",
      "clear goal, needed context, explicit constraints and output format, no filler. Keep the author's intent, language and any placeholders such as {name} exactly.",
      TONES[input.tone ?? "neutral"],
      'Answer with one JSON object and nothing else: {"improvedSystem": "...", "improvedPrompt": "..."}. Leave improvedSystem out when there was no system prompt and none is needed.'
    ].join(" ")
  },
  {
    role: "user",
    content: `System prompt:\n<<<\n${input.system ?? ""}\n>>>\n\nUser prompt:\n<<<\n${input.prompt}\n>>>`
  }
]

/** The two texts from the model's answer: a JSON object (fenced or not), else the whole text as the prompt. */
export const parseImproved = (text: string): { improvedSystem?: string; improvedPrompt?: string } | undefined => {
  const trimmed = text.trim()
  if (trimmed === "") return undefined
  const candidates = [
    trimmed,
    /```(?:json)?\s*([\s\S]*?)```/.exec(trimmed)?.[1],
    trimmed.slice(trimmed.indexOf("{"), trimmed.lastIndexOf("}") + 1)
  ]
  for (const c of candidates) {
    if (!c) continue
    try {
      const v = JSON.parse(c) as Record<string, unknown>
      if (typeof v === "object" && v !== null && (typeof v["improvedPrompt"] === "string" || typeof v["improvedSystem"] === "string")) {
        return {
          ...(typeof v["improvedSystem"] === "string" && v["improvedSystem"].trim() !== "" ? { improvedSystem: v["improvedSystem"] } : {}),
          ...(typeof v["improvedPrompt"] === "string" && v["improvedPrompt"].trim() !== "" ? { improvedPrompt: v["improvedPrompt"] } : {})
        }
      }
    } catch {
      // not this one
    }
  }
  return { improvedPrompt: trimmed }
}

export class Playground extends Context.Tag("gateway/Playground")<Playground, PlaygroundShape>() {
  static readonly layer = Layer.effect(
    Playground,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      let caller: ChatCaller | undefined
      const decode = (json: string): Preset | undefined => {
        try {
          return JSON.parse(json) as Preset
        } catch {
          return undefined
        }
      }
      const notFound = (id: string) =>
        new NotFound({ message: `no playground preset ${JSON.stringify(id)} (GET /api/playground/presets lists them)` })
      const get = (id: string) =>
        Effect.flatMap(kv.get(PRESETS_NAMESPACE, id), (found) => {
          const preset = Option.isSome(found) ? decode(found.value) : undefined
          return preset ? Effect.succeed(preset) : Effect.fail(notFound(id))
        })
      const save = (p: Preset) => Effect.as(kv.set(PRESETS_NAMESPACE, p.id, JSON.stringify(p)), p)
      return {
        list: Effect.map(kv.entries(PRESETS_NAMESPACE), (rows) =>
          rows
            .map(([, json]) => decode(json))
            .filter((p): p is Preset => p !== undefined)
            .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id.localeCompare(b.id)))
        ),
        get,
        create: (input) =>
          save({
            id: `pre_${crypto.randomBytes(8).toString("hex")}`,
            name: input.name,
            endpoint: input.endpoint,
            model: input.model ?? "",
            system: input.system ?? "",
            params_json: input.params_json ?? "{}",
            created_at: new Date().toISOString()
          }),
        update: (id, patch) =>
          Effect.flatMap(get(id), (p) => save({ ...p, ...Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) })),
        remove: (id) => Effect.flatMap(kv.remove(PRESETS_NAMESPACE, id), (removed) => (removed ? Effect.void : Effect.fail(notFound(id)))),
        setCaller: (c) => {
          caller = c
        },
        improve: (input, onBehalfOf) =>
          Effect.gen(function* () {
            const call = caller
            if (call === undefined) return yield* new BadGateway({ message: "the gateway's own routes are not up yet; try again" })
            const result = yield* Effect.tryPromise({
              try: () => call({ model: input.model, stream: false, temperature: 0.2, messages: metaPrompt(input) }, onBehalfOf),
              catch: (e) => new BadGateway({ message: `improve-prompt: the chat completion failed: ${(e as Error).message}` })
            })
            if (result.status !== 200)
              return yield* new BadGateway({
                message: `improve-prompt: model ${JSON.stringify(input.model)} did not answer (${result.status}${result.error ? `: ${result.error}` : ""})`
              })
            const improved = parseImproved(result.text ?? "")
            if (improved === undefined || (improved.improvedPrompt === undefined && improved.improvedSystem === undefined))
              return yield* new BadGateway({
                message: `improve-prompt: model ${JSON.stringify(input.model)} answered nothing usable (an empty answer)`
              })
            return { ...improved, tokensIn: result.tokensIn, tokensOut: result.tokensOut }
          })
      } satisfies PlaygroundShape
    })
  )

  /**
   * Binds improve-prompt's chat completions to the gateway's own routes once the server listens
   * (OwnRoutes, on loopback with the process's internal credential), as the summarizer does.
   */
  static readonly ownRoutesLayer = Layer.scopedDiscard(
    Effect.gen(function* () {
      const playground = yield* Playground
      const own = yield* OwnRoutes
      playground.setCaller(async (body, onBehalfOf) => {
        const res = await own.fetch("/v1/chat/completions", { onBehalfOf, headers: { "x-gateway-no-memory": "true" }, body })
        const answer = (await res.json().catch(() => undefined)) as
          | {
              choices?: Array<{ message?: { content?: unknown } }>
              usage?: { prompt_tokens?: number; completion_tokens?: number }
              error?: { message?: string }
            }
          | undefined
        const content = answer?.choices?.[0]?.message?.content
        return {
          status: res.status,
          text: typeof content === "string" ? content : undefined,
          error: answer?.error?.message,
          tokensIn: answer?.usage?.prompt_tokens ?? 0,
          tokensOut: answer?.usage?.completion_tokens ?? 0
        }
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => playground.setCaller(undefined)))
    })
  )
}
